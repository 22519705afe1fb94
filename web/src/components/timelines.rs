//! The experiment page's timeline section: a configuration's whole-run
//! epochs with sampled host (and GPU) counters over time, a choice of
//! configuration, and why the GPU series are missing when they are.

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::Bundle;

use crate::charts::timeline;
use crate::components::chart_panel::{ChartPanel, Draw};

#[component]
pub fn Timelines(bundle: Arc<Bundle>, experiment: usize, stem: String) -> impl IntoView {
    let e = &bundle.experiments[experiment];
    let configs: Vec<(String, String)> = timeline::configurations_with_timeline(e)
        .into_iter()
        .map(|c| (c.id.clone(), c.label.clone()))
        .collect();
    let first = configs.first().map(|c| c.0.clone());
    let chosen = RwSignal::new(first.clone().unwrap_or_default());
    let b = bundle.clone();
    let draw: Draw = Arc::new(move |c| {
        let id = chosen.get();
        match b.experiments[experiment].configuration(&id) {
            Some(cfg) => timeline::draw(c, cfg),
            None => Err("no such configuration".to_string()),
        }
    });
    let b = bundle.clone();
    let note = move || {
        let id = chosen.get();
        let Some(c) = b.experiments[experiment].configuration(&id) else {
            return (None, String::new());
        };
        let rank = timeline::drawn_rank(c)
            .map(|r| format!("Rank {r}'s epochs (the lowest rank of the merged bundle)."))
            .unwrap_or_default();
        (timeline::gpu_not_available(c), rank)
    };
    first.map(|_| {
        let pick = move |ev| chosen.set(event_target_value(&ev));
        view! {
            <section class="charts timeline-charts">
                <h2>"Over time — whole-run, sampled"</h2>
                <label class="timeline-pick">
                    "Counters of: "
                    <select id="timeline-of" on:change=pick>
                        {super::config_options::config_options(&configs, chosen)}
                    </select>
                </label>
                <ChartPanel
                    id=format!("{stem}-timeline")
                    note="Counters sampled on a side thread during the whole-run epoch (about 20 Hz): host CPU busy in cores and resident memory of every process of the run, GPU utilisation and memory when the device has them, and steps per second between samples. The sampler never touches the device queue."
                        .to_string()
                    draw=draw
                />
                {move || {
                    let (gpu, rank) = note();
                    view! {
                        {(!rank.is_empty()).then(|| view! { <p class="muted">{rank}</p> })}
                        {gpu.map(|why| view! {
                            <p class="gpu-not-available">"No GPU counters: " {why}</p>
                        })}
                    }
                }}
            </section>
        }
    })
}
