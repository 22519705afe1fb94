//! The straggler table of a merged bundle's configuration: the ranks that
//! were slowest most often, with their stage shares, and the verdict — all
//! from `analysis::rank_analysis_in`, the code `stallscope report` uses.

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
            <p class="muted">
                {format!(
                    "{shown} of {total} ranks, most often slowest first, over {} steps compared.",
                    a.steps_compared
                )}
            </p>
        </div>
    })
}
