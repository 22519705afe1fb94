//! A merged bundle as one job: the job's figures of a configuration
//! (`analysis::pooled_summary`) and, in the compare view, the scaling
//! efficiency of a job against a run of another size with where the loss
//! went (`analysis::compare_scaling`, the code `stallscope compare` uses).

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::Bundle;
use stallscope_bundle::analysis::{
    Quantity, Scaling, ScalingRow, Unit, pooled_summary, preferred_phase, show_percent,
};

fn rate(v: Option<f64>) -> String {
    v.map(|r| Unit::for_values(Quantity::Rate, &[r]).show(r))
        .unwrap_or_else(|| "—".into())
}

fn pct(v: Option<f64>) -> String {
    v.map(show_percent).unwrap_or_else(|| "—".into())
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
        .map(|(r, n)| format!(" Rank {r} finished last in {n} epoch(s)."))
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

fn row(r: &ScalingRow) -> impl IntoView + use<> {
    let split =
        |f: fn(&stallscope_bundle::analysis::LossSplit) -> f64| pct(r.split.as_ref().map(f));
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

/// The scaling of NEW over BASE, one table per experiment.
#[component]
pub fn ScalingView(scaling: Scaling) -> impl IntoView {
    let (wb, wn) = (scaling.base_world, scaling.new_world);
    view! {
        <section class="scaling">
            <h3>{format!("Scaling from {wb} to {wn} rank(s)")}</h3>
            <p class="muted">
                {format!("Efficiency = (job samples/s here ÷ base) ÷ ({wn} ÷ {wb}), whole-run. The loss (1 − efficiency) is split by the diagnostic shares of the slowest rank's step: waiting for data, in the barrier or collective (comm), and the rest; a negative part did better than the base.")}
            </p>
            {scaling.experiments.into_iter().map(|e| view! {
                <h4>{format!("{} — {}", e.experiment_id, e.title)}</h4>
                <table class="scaling-table">
                    <thead><tr>
                        <th>"configuration"</th>
                        <th>{format!("base ({wb})")}</th>
                        <th>{format!("this ({wn})")}</th>
                        <th>"efficiency"</th><th>"loss"</th>
                        <th>"data"</th><th>"comm"</th><th>"rest"</th><th></th>
                    </tr></thead>
                    <tbody>{e.rows.iter().map(row).collect_view()}</tbody>
                </table>
            }).collect_view()}
        </section>
    }
}
