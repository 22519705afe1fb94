//! The experiment page's per-rank view of a merged bundle: the job's
//! figures for a chosen configuration, the rank × step heat map of a
//! stage's time per step (comm by default) drawn from the bundle's sidecar
//! file, loaded only when this view opens (fetched beside the bundle, or
//! held in memory for a format 1.2 bundle compacted on load), a search that
//! jumps to one rank, and the straggler analysis of
//! `analysis::rank_analysis_in`.

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::Bundle;
use stallscope_bundle::analysis::rank_analysis_in;
use stallscope_bundle::sidecar::{StageSteps, decode_for};

use crate::charts::rank_heat::{self, Stage};
use crate::components::chart_panel::{ChartPanel, Draw};
use crate::components::job::JobFigures;
use crate::components::stragglers::{FindRank, Stragglers};
use crate::state::AppState;

/// The most bytes one sidecar may have (the viewer holds it in memory).
const SIDECAR_LIMIT: usize = 256 << 20;

/// Load a configuration's sidecar of one stage: dropped files, then the
/// bytes held in memory, then a fetch beside the bundle; decoded and held
/// to the bundle's record of its size and checksum.
async fn load_stage(
    state: AppState,
    bundle: Arc<Bundle>,
    experiment: usize,
    config: String,
    stage: Stage,
) -> Result<Arc<StageSteps>, String> {
    let c = bundle.experiments[experiment]
        .configuration(&config)
        .ok_or("no such configuration")?;
    let record = c
        .ranks
        .as_ref()
        .and_then(|r| r.sidecars.iter().find(|s| s.stage == stage.format_name()))
        .ok_or("the bundle names no sidecar for this stage")?
        .clone();
    let loaded = state
        .bundles
        .with_untracked(|l| l.iter().find(|x| x.key == bundle.id).cloned())
        .ok_or("the bundle is no longer loaded")?;
    let dropped = state
        .dropped_sidecars
        .with_untracked(|m| m.get(&record.file).cloned());
    let bytes = match (dropped, loaded.sidecars.get(&record.file)) {
        (Some(b), _) => b.to_vec(),
        (None, Some(b)) => b.clone(),
        (None, None) => {
            let url = crate::loading::beside(&loaded.source, &record.file);
            crate::loading::fetch_sidecar(&url, SIDECAR_LIMIT).await?
        }
    };
    decode_for(&bytes, &record, &bundle.id)
        .map(Arc::new)
        .map_err(|e| format!("{}: {e}", record.file))
}

#[component]
pub fn RankPanel(bundle: Arc<Bundle>, experiment: usize, stem: String) -> impl IntoView {
    let e = &bundle.experiments[experiment];
    let configs: Vec<(String, String)> = rank_heat::configurations_with_ranks(e)
        .into_iter()
        .map(|c| (c.id.clone(), c.label.clone()))
        .collect();
    let first = configs.first().map(|c| c.0.clone())?;
    let chosen = RwSignal::new(first.clone());
    let stage = RwSignal::new(None::<Stage>);
    // The heat map points at the rank the others waited for most, at first.
    let top = e
        .configuration(&first)
        .and_then(|c| rank_analysis_in(&bundle, c))
        .and_then(|a| a.stragglers.first().map(|s| s.0));
    let mark = RwSignal::new(top);
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
            .unwrap_or(Stage::Comm)
    };
    let b = bundle.clone();
    let state = expect_context::<AppState>();
    let steps =
        LocalResource::new(move || load_stage(state, b.clone(), experiment, chosen.get(), shown()));
    let ranks = bundle.ranks.len();
    let pick_config = move |ev| chosen.set(event_target_value(&ev));
    let pick_stage = move |ev| stage.set(Stage::from_str(&event_target_value(&ev)));
    let (b, b2, stem) = (bundle.clone(), bundle.clone(), stem.clone());
    Some(view! {
        <section class="charts rank-view">
            <h2>{format!("Ranks — {ranks} processes, diagnostic")}</h2>
            {move || view! { <JobFigures bundle=b2.clone() experiment=experiment configuration=chosen.get()/> }}
            <p class="muted">
                "Each row is one rank's diagnostic epoch, each column a step; with more ranks than pixel rows a row shows the largest value of its ranks. A rank that others wait for shows little comm time while theirs is long; a slow rank's own next-wait or compute row stands out."
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
            {move || match steps.get() {
                None => view! { <p class="muted rank-steps-loading">"Loading every rank's steps…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="warning rank-steps-failed">"The per-rank steps could not be read: " {e}</p> }.into_any(),
                Some(Ok(s)) => {
                    let draw: Draw = Arc::new(move |c| match rank_heat::pick_run(&s) {
                        Some(run) => rank_heat::draw(c, run, shown(), mark.get()),
                        None => Err("the sidecar holds no run".to_string()),
                    });
                    view! { <ChartPanel id=format!("{stem}-ranks") diagnostic=true draw=draw/> }.into_any()
                }
            }}
            {move || {
                let id = chosen.get();
                view! {
                    <FindRank bundle=b.clone() experiment=experiment configuration=id.clone() mark=mark/>
                    <Stragglers bundle=b.clone() experiment=experiment configuration=id/>
                }
            }}
        </section>
    })
}
