//! What each configuration's whole-run epochs cost besides time (format
//! 1.2): `analysis::cost_summary` per configuration and `cost_verdict` for
//! the experiment, then the processes and threads one epoch recorded. The
//! viewer only shows these figures; the shared crate computes them.

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::analysis::{
    CostSummary, Quantity, Unit, cost_summary, cost_verdict, show_bytes,
};
use stallscope_bundle::{Bundle, CpuPartKind, Run, TimingMode};

/// Median of a summary, shown with `decimals`.
fn median(s: &Option<stallscope_bundle::analysis::Summary>, decimals: usize) -> String {
    s.as_ref()
        .map(|s| format!("{:.decimals$}", s.median))
        .unwrap_or_else(|| "—".into())
}

fn opt(v: Option<f64>, show: impl Fn(f64) -> String) -> String {
    v.map(show).unwrap_or_else(|| "—".into())
}

fn has_figures(c: &CostSummary) -> bool {
    c.cpu_s_per_1000_samples.is_some()
        || c.cpu_cores_mean.is_some()
        || c.peak_rss_all_bytes.is_some()
        || c.gpu_utilization_mean_percent.is_some()
        || c.host_cpu_mean_cores.is_some()
}

/// The first whole-run run with CPU parts (in a merged bundle, the lowest rank's).
fn parts_run(runs: &[Run]) -> Option<&Run> {
    runs.iter()
        .filter(|r| r.timing_mode == TimingMode::WholeRun)
        .filter(|r| r.cost.as_ref().is_some_and(|c| !c.parts.is_empty()))
        .min_by_key(|r| r.rank.unwrap_or(0))
}

#[component]
pub fn Cost(bundle: Arc<Bundle>, experiment: usize) -> impl IntoView {
    let e = &bundle.experiments[experiment];
    let rows: Vec<(String, String, CostSummary)> = e
        .configurations
        .iter()
        .map(|c| (c.id.clone(), c.label.clone(), cost_summary(e, c)))
        .filter(|(_, _, s)| has_figures(s))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let verdict = cost_verdict(e);
    let phase = rows[0].2.phase.as_str();
    // One CPU-time unit for the column, as the comparison table has.
    let cpu: Vec<f64> = rows
        .iter()
        .filter_map(|(_, _, s)| s.cpu_s_per_1000_samples.as_ref().map(|x| x.median))
        .collect();
    let cpu_unit = Unit::for_values(Quantity::CpuTime, &cpu).three_digits();
    let cpu_head = format!("CPU per 1,000 samples [{}]", cpu_unit.suffix);
    let parts = e.configurations.iter().find_map(|c| {
        let r = parts_run(&c.runs)?;
        Some((c.label.clone(), r.id.clone(), r.rank, r.cost.clone()?))
    });
    Some(view! {
        <section class="cost">
            <h2>{format!("Cost — whole-run, {phase} epochs")}</h2>
            {verdict.map(|v| view! { <p class="verdict cost-verdict">{v}</p> })}
            <div class="table-scroll">
                <table class="cost-table">
                    <thead>
                        <tr>
                            <th>"configuration"</th>
                            <th>{cpu_head}</th>
                            <th>"cores busy (CPU-s ÷ wall s)"</th>
                            <th>"host CPU, sampled mean [cores]"</th>
                            <th>"peak RSS, all processes"</th>
                            <th>"GPU utilisation, sampled mean"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {rows
                            .into_iter()
                            .map(|(id, label, s)| view! {
                                <tr data-config=id>
                                    <th>{label}</th>
                                    <td class="cell">{opt(s.cpu_s_per_1000_samples.as_ref().map(|x| x.median), |v| cpu_unit.number(v))}</td>
                                    <td class="cell">{median(&s.cpu_cores_mean, 2)}</td>
                                    <td class="cell">{opt(s.host_cpu_mean_cores, |v| format!("{v:.2}"))}</td>
                                    <td class="cell">{opt(s.peak_rss_all_bytes, show_bytes)}</td>
                                    <td class="cell">{opt(s.gpu_utilization_mean_percent, |v| format!("{v:.0}%"))}</td>
                                </tr>
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
            <p class="muted">"Medians over the repeats. Utilisation is NVML's share of time any kernel ran: a clue, not a throughput — a higher one without a shorter epoch is not an improvement."</p>
            {parts.map(|(label, run, rank, cost)| view! {
                <details class="cost-parts">
                    <summary>
                        {format!(
                            "Processes and threads of {label}, run {run}{}: {:.3} CPU-s over {:.3} s",
                            rank.map(|r| format!(", rank {r}")).unwrap_or_default(),
                            cost.cpu_s,
                            cost.wall_s
                        )}
                    </summary>
                    <table>
                        <thead><tr><th>"part"</th><th>"kind"</th><th>"user s"</th><th>"system s"</th><th>"peak RSS"</th></tr></thead>
                        <tbody>
                            {cost.parts.into_iter().map(|p| view! {
                                <tr>
                                    <td>{p.name}</td>
                                    <td>{match p.kind { CpuPartKind::Process => "process", CpuPartKind::Thread => "thread (inside the runner's figure)" }}</td>
                                    <td class="cell">{format!("{:.3}", p.user_s)}</td>
                                    <td class="cell">{format!("{:.3}", p.system_s)}</td>
                                    <td class="cell">{p.peak_rss_bytes.map(|b| show_bytes(b as f64)).unwrap_or_else(|| "—".into())}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </details>
            })}
        </section>
    })
}
