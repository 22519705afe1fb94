//! The straggler table of a merged bundle's configuration: the ranks that
//! were slowest most often, with their stage shares, and the verdict — all
//! from `analysis::rank_analysis_in`, the code `stallscope report` uses —
//! and the search that finds any one rank of thousands.

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::analysis::{rank_analysis_in, show_percent};
use stallscope_bundle::{Bundle, TimingMode};

/// The most rows the table shows (ranks sorted by how often they straggled).
const ROWS: usize = 16;

#[component]
pub fn Stragglers(bundle: Arc<Bundle>, experiment: usize, configuration: String) -> impl IntoView {
    let c = bundle.experiments[experiment].configuration(&configuration)?;
    let a = rank_analysis_in(&bundle, c)?;
    let mut ranks = a.ranks.clone();
    ranks.sort_by(|x, y| {
        y.straggler_steps
            .cmp(&x.straggler_steps)
            .then(x.rank.cmp(&y.rank))
    });
    let total = ranks.len();
    let shown = ranks.len().min(ROWS);
    let share = |v: Option<f64>| v.map(show_percent).unwrap_or_else(|| "—".into());
    // Whole-run step time when every rank has one, else the diagnostic
    // median: the heading says which, beside the diagnostic shares.
    let step_heading = match &a.step_mode {
        Some(TimingMode::WholeRun) => "step time (whole-run)",
        Some(TimingMode::Diagnostic) => "step median (diagnostic)",
        _ => "step time",
    };
    Some(view! {
        <div class="stragglers">
            {a.verdict.clone().map(|v| view! { <p class="verdict rank-verdict">{v}</p> })}
            {a.notes.iter().map(|n| view! { <p class="muted rank-note">{n.clone()}</p> }).collect_view()}
            <div class="table-scroll">
                <table class="straggler-table">
                    <thead>
                        <tr>
                            <th>"rank"</th>
                            <th>"times the straggler"</th>
                            <th>"share of steps"</th>
                            <th>"next-wait share"</th>
                            <th>"comm share"</th>
                            <th>{step_heading}</th>
                        </tr>
                    </thead>
                    <tbody>
                        {ranks
                            .into_iter()
                            .take(ROWS)
                            .map(|r| view! {
                                <tr data-rank=r.rank.to_string()>
                                    <th class="rank">{r.rank.to_string()}</th>
                                    <td class="cell straggler-steps">{r.straggler_steps.to_string()}</td>
                                    <td class="cell">{share(r.straggler_share)}</td>
                                    <td class="cell">{share(r.next_wait_share)}</td>
                                    <td class="cell">{share(r.comm_share)}</td>
                                    <td class="cell">{r.step_median_s.map(|s| format!("{:.2} ms", s * 1e3)).unwrap_or_else(|| "—".into())}</td>
                                </tr>
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
            <p class="muted">
                {format!(
                    "{shown} of {total} ranks, most often slowest first, over {} steps compared.",
                    a.steps_compared
                )}
            </p>
        </div>
    })
}

/// Jump to one rank: its row of the per-rank columns, and a marker at its
/// row of the heat map (`mark`; the top straggler until the reader asks).
#[component]
pub fn FindRank(
    bundle: Arc<Bundle>,
    experiment: usize,
    configuration: String,
    mark: RwSignal<Option<u32>>,
) -> impl IntoView {
    let c = bundle.experiments[experiment].configuration(&configuration)?;
    let a = Arc::new(rank_analysis_in(&bundle, c)?);
    let world = a.ranks.len();
    let on_input = move |ev| mark.set(event_target_value(&ev).trim().parse::<u32>().ok());
    let share = |v: Option<f64>| v.map(show_percent).unwrap_or_else(|| "—".into());
    Some(view! {
        <div class="find-rank">
            <label>
                {format!("Find a rank (0–{}): ", world.saturating_sub(1))}
                <input
                    id="rank-find"
                    type="number"
                    min="0"
                    prop:value=move || mark.get().map(|r| r.to_string()).unwrap_or_default()
                    on:input=on_input
                />
            </label>
            {move || {
                let r = mark.get()?;
                let Some(s) = a.ranks.iter().find(|x| x.rank == r) else {
                    return Some(view! { <p class="warning found-rank">{format!("No rank {r} in this configuration.")}</p> }.into_any());
                };
                Some(view! {
                    <p class="found-rank" data-rank=r.to_string()>
                        {format!(
                            "rank {r}: the straggler in {} of {} steps; next-wait {}, transfer {}, compute {}, comm {} of its step; {}",
                            s.straggler_steps,
                            a.steps_compared,
                            share(s.next_wait_share),
                            share(s.transfer_share),
                            share(s.compute_share),
                            share(s.comm_share),
                            s.samples_per_s.map(|v| format!("{v:.0} samples/s (its own, whole-run)")).unwrap_or_default()
                        )}
                    </p>
                }.into_any())
            }}
        </div>
    })
}
