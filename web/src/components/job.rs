//! A merged bundle as one job: the job's figures of a configuration
//! (`analysis::pooled_summary`) and, in the compare view, the scaling
//! efficiency of a job against a run of another size with where the loss
//! went (`analysis::compare_scaling`, the code `stallscope compare` uses).

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::Bundle;
use stallscope_bundle::analysis::{
    Quantity, Scaling, ScalingRow, Unit, pooled_summary, preferred_phase, rank_analysis_in,
    show_percent,
};

fn rate(v: Option<f64>) -> String {
    v.map(|r| Unit::for_values(Quantity::Rate, &[r]).show(r))
        .unwrap_or_else(|| "—".into())
}

fn pct(v: Option<f64>) -> String {
    v.map(show_percent).unwrap_or_else(|| "—".into())
}

/// What NEW's ranks did in each configuration of an experiment: the rank
/// analysis' sentence (the other ranks' comm share), labelled with the
/// configuration.
fn others_line(new: &Bundle, experiment: &str) -> Vec<String> {
    let Some(e) = new.experiment(experiment) else {
        return Vec::new();
    };
    e.configurations
        .iter()
        .filter_map(|c| {
            let v = rank_analysis_in(new, c)?.verdict?;
            Some(format!("{} — this bundle's ranks: {v}", c.label))
        })
        .collect()
}

/// One line: the job's samples/s and step time, and the rank that finished
/// last most often.
#[component]
pub fn JobFigures(bundle: Arc<Bundle>, experiment: usize, configuration: String) -> impl IntoView {
    let e = &bundle.experiments[experiment];
    let c = e.configuration(&configuration)?;
    let j = pooled_summary(c, preferred_phase(e))?;
    let step = j
        .step_s
        .map(|s| format!("{:.2} ms", s.median * 1e3))
        .unwrap_or_else(|| "—".into());
    let last = j
        .slowest
        .first()
        .map(|(r, n)| {
            format!(
                " Rank {r} finished last in {n} epoch{}.",
                if *n == 1 { "" } else { "s" }
            )
        })
        .unwrap_or_default();
    Some(view! {
        <p class="job-figures">
            <b>{format!("Job of {} ranks: ", j.world)}</b>
            <span class="job-rate">{rate(j.samples_per_s.map(|s| s.median))}</span>
            {format!(
                " (whole-run, {}: every rank's samples ÷ the slowest rank's epoch), step {step} (the slowest rank's).{last}",
                j.phase.as_str()
            )}
        </p>
    })
}

/// Below this loss (either way) there is nothing to split: the parts would
/// only move between themselves.
const NO_LOSS: f64 = 0.01;

fn row(r: &ScalingRow) -> impl IntoView + use<> {
    let split = |f: fn(&stallscope_bundle::analysis::LossSplit) -> f64| {
        let shown = r
            .split
            .as_ref()
            .filter(|_| r.loss.is_some_and(|l| l.abs() >= NO_LOSS));
        pct(shown.map(f))
    };
    view! {
        <tr data-config=r.config_id.clone()>
            <th>{r.label.clone()}</th>
            <td class="cell">{rate(r.base_rate)}</td>
            <td class="cell">{rate(r.new_rate)}</td>
            <td class="cell efficiency">{pct(r.efficiency)}</td>
            <td class="cell">{pct(r.loss)}</td>
            <td class="cell">{split(|s| s.data)}</td>
            <td class="cell">{split(|s| s.comm)}</td>
            <td class="cell">{split(|s| s.rest)}</td>
            <td class="muted">{r.note.clone().unwrap_or_default()}</td>
        </tr>
    }
}

fn ranks(n: u32) -> String {
    format!("{n} rank{}", if n == 1 { "" } else { "s" })
}

/// The scaling of NEW over BASE, one table per experiment, with what each
/// part of the loss is and, under it, what NEW's other ranks did (they
/// wait in comm for the slowest, whose own comm share is small).
#[component]
pub fn ScalingView(scaling: Scaling, new: Arc<Bundle>) -> impl IntoView {
    let (wb, wn) = (scaling.base_world, scaling.new_world);
    view! {
        <section class="scaling">
            <h3>{format!("Scaling from {} to {}", ranks(wb), ranks(wn))}</h3>
            <p class="muted">
                {format!("Efficiency = (job samples/s here ÷ base) ÷ ({wn} ÷ {wb}), whole-run. The loss (1 − efficiency) is split by the diagnostic shares of the slowest rank's step, the one the job waits for.")}
            </p>
            <ul class="muted scaling-parts">
                <li><b>"data"</b>": the slowest rank's wait for its next batch, beyond the base's."</li>
                <li><b>"comm (slowest rank)"</b>": the slowest rank's time in the barrier or collective, beyond the base's. It waits least: the other ranks' wait for it is said under the table."</li>
                <li><b>"rest"</b>": everything else — the slowest rank's copy and compute beyond the base's (a rank slower at computing lands here) and the barrier's own cost. A part below 0 did better than the base. With under 1% of loss either way there is nothing to split: “—”."</li>
            </ul>
            {scaling.experiments.into_iter().map(|e| {
                let others = others_line(&new, &e.experiment_id);
                view! {
                <h4>{format!("{} — {}", e.experiment_id, e.title)}</h4>
                <div class="table-scroll">
                    <table class="scaling-table">
                        <thead><tr>
                            <th>"configuration"</th>
                            <th>{format!("base ({wb})")}</th>
                            <th>{format!("this ({wn})")}</th>
                            <th>"efficiency"</th><th>"loss"</th>
                            <th>"data"</th><th>"comm (slowest rank)"</th><th>"rest"</th><th></th>
                        </tr></thead>
                        <tbody>{e.rows.iter().map(row).collect_view()}</tbody>
                    </table>
                </div>
                {others.into_iter().map(|l| view! { <p class="scaling-others">{l}</p> }).collect_view()}
            }}).collect_view()}
        </section>
    }
}
