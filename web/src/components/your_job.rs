//! A `stallscope job` bundle as the answer to its user's question: first
//! the answer (`job_answer::answer`: the headline, the memory the change
//! costs, the loader's share, the next step), then what it rests on
//! (`analysis::job_digest`): the recommendation as the change to make with
//! its verified A/B ratio, the command and the settings the job really
//! used, the replay ceiling with the stall by difference, and each
//! configuration's memory per process (RSS, PSS, USS). The sweep's table and
//! charts are the `job` experiment's page.

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::analysis::{
    ConfigurationMemory, JOB_ID, JobDigest, Quantity, Recommendation, ReplayCeiling, Unit,
    Verification, job_answer, job_digest, show_bytes, show_percent, show_ratio, show_step_ms as ms,
};
use stallscope_bundle::{Bundle, ProcessMemory};

use crate::components::job_answer::{answer, grid_line};
use crate::route::{ExperimentView, Route};

fn bytes(v: Option<u64>) -> String {
    v.map(|b| show_bytes(b as f64))
        .unwrap_or_else(|| "—".into())
}

/// The job panel of a bundle with a `job` experiment; nothing otherwise.
#[component]
pub fn YourJob(bundle: Arc<Bundle>) -> impl IntoView {
    let d = job_digest(&bundle)?;
    let a = job_answer(&bundle)?;
    let sweep = Route::Experiment(ExperimentView::new(&bundle.id, JOB_ID)).to_hash();
    Some(view! {
        <section class="your-job">
            <h2 class="job-title">"Your training job"</h2>
            {answer(&a, d.recommendation.as_ref())}
            <h3 class="job-basis">"What the answer rests on"</h3>
            {d.recommendation.clone().map(recommendation)}
            {command(&d)}
            {settings(&d)}
            {replay(&d)}
            <p><a class="job-sweep-link" href=sweep>"The configurations' table and charts"</a></p>
            {memory(&d.memory)}
        </section>
    })
}

fn command(d: &JobDigest) -> impl IntoView + use<> {
    let window = match (d.steps, d.warmup) {
        (Some(s), Some(w)) => format!("{s} measured steps after {w} warm-up steps, per run"),
        _ => String::new(),
    };
    view! {
        <p class="job-command"><code>{d.command.clone().unwrap_or_else(|| "—".into())}</code></p>
        <p class="muted">{window}</p>
    }
}

/// What the script's own DataLoader really ran with, read back.
fn settings(d: &JobDigest) -> impl IntoView + use<> {
    let args: Vec<String> = d
        .script_settings
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let built: Vec<String> = d
        .dataloader
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    view! {
        <p class="job-settings">
            <b>"Your settings, as the DataLoader ran them: "</b>
            <code>{if args.is_empty() { "— (not read back)".to_string() } else { args.join(", ") }}</code>
        </p>
        {(!built.is_empty()).then(|| view! { <p class="muted">{built.join(" · ")}</p> })}
    }
}

fn recommendation(r: Recommendation) -> impl IntoView {
    let change = r.is_change();
    let head = if change {
        "Recommendation: make this change"
    } else {
        "Recommendation: keep your settings"
    };
    let grid = grid_line(&r);
    view! {
        <div class="job-recommendation" class:keep=!change>
            <h3>{head}</h3>
            {r.change.clone().map(|c| view! { <pre class="job-change">{c}</pre> })}
            {r.verification.as_ref().map(verified)}
            {grid.map(|g| view! { <p class="muted">{g}</p> })}
            {r.text.clone().map(|t| view! {
                <details class="job-reasoning">
                    <summary>"How it was chosen"</summary>
                    <p>{t}</p>
                </details>
            })}
        </div>
    }
}

/// The A/B pairs' ratio and spread, and whether every pair agreed.
fn verified(v: &Verification) -> impl IntoView + use<> {
    let how = format!(
        "median of {} interleaved whole-run A/B pairs, each run a fresh process{}; pairs {}–{}",
        v.pairs,
        v.order
            .as_ref()
            .map(|o| format!(", in the order {o}"))
            .unwrap_or_default(),
        show_ratio(v.min),
        show_ratio(v.max)
    );
    let (label, class) = if v.confirmed {
        ("Verified: ", "job-verified confirmed")
    } else {
        (
            "Not confirmed (not every pair was faster): ",
            "job-verified",
        )
    };
    view! {
        <p class=class>
            <b>{label}</b>
            <span class="job-ratio">{show_ratio(v.median)}</span>
            {format!(" ({how}).")}
        </p>
    }
}

/// The ceiling of the loop with free data, and what the loader costs.
fn replay(d: &JobDigest) -> Option<impl IntoView + use<>> {
    let c: &ReplayCeiling = d.replay.as_ref()?;
    let held = match (c.batches, c.bytes) {
        (Some(n), Some(b)) => format!(" ({n} cached batches, {})", show_bytes(b as f64)),
        _ => String::new(),
    };
    let unit = Unit::for_values(Quantity::Rate, &[c.rate, d.script_rate.unwrap_or(c.rate)]);
    let yours = match (d.script_step_s, d.script_rate) {
        (Some(s), Some(r)) => format!(" against {} ({}) with your settings", ms(s), unit.show(r)),
        _ => String::new(),
    };
    let stall = d.script_stall.map(|s| {
        if s <= 0.0 {
            "The loader costs nothing measurable: the replay was no faster.".to_string()
        } else {
            format!(
                "The loader costs {} of your step (stall by difference: 1 − yours ÷ replay).",
                show_percent(s)
            )
        }
    });
    Some(view! {
        <div class="job-replay">
            <h3>"The step with free data (replay)"</h3>
            <p>
                {format!("With the loader free{held}: a step of ")}
                <span class="job-ceiling">{ms(c.step_s)}</span>
                {format!(" ({}){yours}.", unit.show(c.rate))}
            </p>
            {stall.map(|s| view! { <p class="job-stall">{s}</p> })}
        </div>
    })
}

/// Each configuration's processes at the window's end: the training
/// process and each worker's RSS, PSS and USS.
fn memory(m: &[ConfigurationMemory]) -> Option<impl IntoView + use<>> {
    (!m.is_empty()).then(|| {
        view! {
            <section class="worker-memory">
                <h3>"Memory per process, at the end of the measured window (whole-run)"</h3>
                <p class="muted">
                    "RSS counts every page a process holds, shared ones included; PSS divides each shared page among its sharers (the workers' PSS add up to what they cost together); USS is what the process alone holds. A worker's USS growing with the dataset is copy-on-read under fork."
                </p>
                <table class="worker-memory-table">
                    <thead><tr>
                        <th>"configuration"</th><th>"process"</th>
                        <th>"RSS"</th><th>"PSS"</th><th>"USS"</th>
                    </tr></thead>
                    <tbody>{m.iter().map(configuration_rows).collect_view()}</tbody>
                </table>
            </section>
        }
    })
}

fn configuration_rows(c: &ConfigurationMemory) -> impl IntoView + use<> {
    let n = c.processes.len();
    c.processes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let head = (i == 0).then(|| view! { <th rowspan=n.to_string()>{c.label.clone()}</th> });
            view! {
                <tr data-config=c.id.clone() data-role=p.role.clone()>
                    {head}
                    <td>{process_name(p)}</td>
                    <td class="cell">{bytes(p.rss_bytes)}</td>
                    <td class="cell">{bytes(p.pss_bytes)}</td>
                    <td class="cell uss">{bytes(p.uss_bytes)}</td>
                </tr>
            }
        })
        .collect_view()
}

fn process_name(p: &ProcessMemory) -> String {
    let name = match (p.role.as_str(), p.worker_id) {
        ("main", _) => "training process".to_string(),
        ("worker", Some(id)) => format!("worker {id}"),
        (role, _) => role.to_string(),
    };
    match &p.note {
        Some(note) => format!("{name} ({note})"),
        None => name,
    }
}
