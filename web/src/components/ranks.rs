//! The experiment page's per-rank view of a merged bundle: the rank × step
//! heat map of a stage's time per step (comm by default) for a chosen
//! configuration, and the straggler analysis of `analysis::rank_analysis`.

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::Bundle;

use crate::charts::rank_heat::{self, Stage};
use crate::components::chart_panel::{ChartPanel, Draw};
use crate::components::stragglers::Stragglers;

#[component]
pub fn RankPanel(bundle: Arc<Bundle>, experiment: usize, stem: String) -> impl IntoView {
    let e = &bundle.experiments[experiment];
    let configs: Vec<(String, String)> = rank_heat::configurations_with_ranks(e)
        .into_iter()
        .map(|c| (c.id.clone(), c.label.clone()))
        .collect();
    let first = configs.first().map(|c| c.0.clone())?;
    let chosen = RwSignal::new(first);
    let stage = RwSignal::new(None::<Stage>);
    let b = bundle.clone();
    // The stages of the chosen configuration, comm first when it has comm.
    let stages = Memo::new(move |_| {
        b.experiments[experiment]
            .configuration(&chosen.get())
            .map(rank_heat::stages_of)
            .unwrap_or_default()
    });
    let shown = move || {
        let have = stages.get();
        stage
            .get()
            .filter(|s| have.contains(s))
            .or_else(|| have.first().copied())
            .unwrap_or(Stage::NextWait)
    };
    let b = bundle.clone();
    let draw: Draw = Arc::new(move |c| {
        let id = chosen.get();
        match b.experiments[experiment].configuration(&id) {
            Some(cfg) => rank_heat::draw(c, cfg, shown()),
            None => Err("no such configuration".to_string()),
        }
    });
    let ranks = bundle.ranks.len();
    let pick_config = move |ev| chosen.set(event_target_value(&ev));
    let pick_stage = move |ev| stage.set(Stage::from_str(&event_target_value(&ev)));
    let b = bundle.clone();
    Some(view! {
        <section class="charts rank-view">
            <h2>{format!("Ranks — {ranks} processes, diagnostic")}</h2>
            <p class="muted">
                "Each row is one rank's diagnostic epoch, each column a step. A rank that others wait for shows little comm time while theirs is long; a slow rank's own next-wait or compute row stands out."
            </p>
            <label class="rank-pick">
                "Configuration: "
                <select id="ranks-of" on:change=pick_config>
                    {super::config_options::config_options(&configs, chosen)}
                </select>
            </label>
            " "
            <label class="rank-pick">
                "Stage: "
                <select id="rank-stage" on:change=pick_stage>
                    {move || {
                        let now = shown();
                        stages
                            .get()
                            .into_iter()
                            .map(|s| view! { <option value=s.as_str() selected=s == now>{s.as_str()}</option> })
                            .collect_view()
                    }}
                </select>
            </label>
            <ChartPanel id=format!("{stem}-ranks") diagnostic=true draw=draw/>
            {move || {
                let id = chosen.get();
                view! { <Stragglers bundle=b.clone() experiment=experiment configuration=id/> }
            }}
        </section>
    })
}
