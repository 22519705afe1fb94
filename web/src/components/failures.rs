//! Failed configurations in full: an out-of-memory error with its cap,
//! counters, the error text and whether its numbers fit the hardware
//! (`analysis::oom_plausibility`); other failures with their message.

use leptos::prelude::*;
use stallscope_bundle::analysis::{failure_text, oom_plausibility, show_bytes};
use stallscope_bundle::{Bundle, Failure, PlausibilityVerdict};

#[component]
pub fn Failures(bundle: std::sync::Arc<Bundle>, experiment: usize) -> impl IntoView {
    let failed: Vec<_> = bundle.experiments[experiment]
        .configurations
        .iter()
        .filter_map(|c| Some((c.label.clone(), c.failure.clone()?)))
        .collect();
    (!failed.is_empty()).then(|| {
        view! {
            <section class="failures">
                <h2>"Failed configurations"</h2>
                <p class="muted">"Recorded as results: the run went on after each."</p>
                {failed.into_iter().map(|(label, f)| failure_view(label, f)).collect_view()}
            </section>
        }
    })
}

fn failure_view(label: String, f: Failure) -> impl IntoView {
    let summary = failure_text(&f);
    let details = match f {
        Failure::OutOfMemory(o) => {
            let bytes = |b: Option<u64>| b.map(|v| show_bytes(v as f64));
            let mut facts: Vec<(&'static str, String)> = Vec::new();
            let mut push = |k: &'static str, v: Option<String>| {
                if let Some(v) = v {
                    facts.push((k, v));
                }
            };
            push("memory fraction", o.memory_fraction.map(|f| f.to_string()));
            push("allocator cap", bytes(o.cap_bytes));
            push("asked for more", bytes(o.requested_bytes));
            push("allocated when it failed", bytes(o.allocated_bytes));
            push(
                "reserved but unallocated",
                bytes(o.reserved_unallocated_bytes),
            );
            push("device free", bytes(o.device_free_bytes));
            push("device total", bytes(o.device_total_bytes));
            push(
                "quantities quoted from the message",
                (!o.message_quantities.is_empty()).then(|| o.message_quantities.join(", ")),
            );
            let p = o
                .plausibility
                .clone()
                .unwrap_or_else(|| oom_plausibility(&o));
            let verdict = match p.verdict {
                PlausibilityVerdict::Plausible => "the message's numbers fit the hardware",
                PlausibilityVerdict::Implausible => "the message's numbers do not fit the hardware",
                PlausibilityVerdict::Unknown => "the message's numbers cannot be checked",
            };
            let implausible = p.verdict == PlausibilityVerdict::Implausible;
            view! {
                <table class="facts">
                    <tbody>
                        {facts.into_iter().map(|(k, v)| view! { <tr><th>{k}</th><td>{v}</td></tr> }).collect_view()}
                    </tbody>
                </table>
                {o.message.map(|m| view! { <pre class="error-text">{m}</pre> })}
                <p class:warning=implausible class="plausibility">
                    <b>{verdict}</b> ": " {p.findings.join("; ")}
                </p>
            }
                .into_any()
        }
        _ => ().into_any(),
    };
    view! {
        <div class="failure-card">
            <h3>{label} ": " {summary}</h3>
            {details}
        </div>
    }
}
