//! A short explanation of every metric on the page, plus the two timing
//! modes; the explanations are the analysis crate's own (`Metric::explanation`).

use leptos::prelude::*;
use stallscope_bundle::Experiment;
use stallscope_bundle::analysis::{Metric, default_columns, preferred_phase};

#[component]
pub fn MetricGlossary(metrics: Vec<Metric>) -> impl IntoView {
    view! {
        <section class="glossary">
            <h3>"What the figures mean"</h3>
            <dl>
                <dt>"whole-run"</dt>
                <dd>
                    "Synchronized only before and after the epoch: the loader, the copy and the model overlap as in real training. Judge whether a change helped by these figures alone."
                </dd>
                <dt>"diagnostic — synchronized at every stage"</dt>
                <dd>
                    "A barrier after next(), after the copy and after the step shows which stage waits, but removes the overlap: its samples/s and its stage sums are not performance."
                </dd>
                {metrics
                    .into_iter()
                    .map(|m| view! { <dt>{m.label()}</dt> <dd class="metric-explanation">{m.explanation()}</dd> })
                    .collect_view()}
            </dl>
        </section>
    }
}

/// The metrics an experiment's table shows, each once.
pub fn metrics_of(e: &Experiment) -> Vec<Metric> {
    let mut out: Vec<Metric> = Vec::new();
    for k in default_columns(e, preferred_phase(e)) {
        if !out.contains(&k.metric) {
            out.push(k.metric);
        }
    }
    out
}
