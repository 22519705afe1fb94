//! `--replay`: the script's own settings with the measured window fed from
//! batches cached in memory, so the loader costs nothing (DS-Analyzer's
//! method). After the warm-up the instrumentation takes up to `--steps` real
//! batches from the loader (fewer when they would pass `--replay-mib`) and
//! every step of the window takes the next of them, cycling. Its whole-run
//! step is the ceiling the job's loop could reach with free data; the stall
//! is read by difference: 1 − samples/s with the real loader ÷ with replay.
//! It is its own experiment (`job-replay`), so no table or verdict takes it
//! for a setting one could adopt.

use serde_json::{Value, json};
use stallscope_bundle::analysis::{
    Quantity, Unit, job_digest, show_bytes, show_percent, show_step_ms as ms,
};
use stallscope_bundle::{Bundle, Configuration, Experiment, ExperimentKind, ParamValue};

use crate::unit::{JobExperiment, JobPlan};

pub const ID: &str = stallscope_bundle::analysis::JOB_REPLAY_ID;

/// The replay experiment of a job: one configuration, the script's own
/// settings, both timing modes.
pub fn job(plan: &JobPlan, max_mib: u64) -> JobExperiment {
    let mut plan = plan.clone();
    plan.work = plan.work.join(ID);
    let steps = plan.steps;
    let mut e = Experiment::new(
        ID,
        ExperimentKind::Loader,
        "Replay: your loop with the loader free",
    );
    e.description = Some(format!(
        "The script's own settings; after the warm-up, up to {steps} real batches (at most \
         {max_mib} MiB) are taken from its DataLoader and held in memory, and every step of the \
         window takes the next of them, cycling: the loader costs nothing. The whole-run step is \
         the ceiling of the job's loop with free data (DS-Analyzer's method); the stall by \
         difference is 1 − samples/s with the real loader ÷ samples/s with replay. Memory \
         figures include the cached batches."
    ));
    e.settings
        .insert("replay_max_mib".into(), ParamValue::from(max_mib as i64));
    e.configurations =
        vec![Configuration::new("replay", "your settings, replayed").with_param("replay", true)];
    let mut job = JobExperiment::new(plan, e, vec![json!({})]);
    job.replay = json!({"batches": steps, "max_bytes": max_mib.saturating_mul(1 << 20)});
    job
}

/// What the replay held, from its `replay` record: batches, bytes, and why
/// fewer than asked.
pub fn record(e: &mut Experiment, replayed: Option<&Value>) {
    let (Some(r), Some(c)) = (replayed, e.configurations.first_mut()) else {
        return;
    };
    for (key, field) in [("replay_batches", "batches"), ("replay_bytes", "bytes")] {
        if let Some(n) = r[field].as_u64() {
            c.params.insert(key.into(), ParamValue::from(n as i64));
        }
    }
    if let Some(why) = r["short"].as_str() {
        c.params
            .insert("replay_short".into(), ParamValue::from(why));
    }
}

pub use stallscope_bundle::analysis::{replay_ceiling as ceiling, replay_stall as stall};

/// One sentence: the ceiling against the job's own settings (`script` of
/// the experiment `job`, as `analysis::job_digest` reads them), with the
/// stall by difference.
pub fn sentence(b: &Bundle) -> Option<String> {
    let d = job_digest(b)?;
    let (ceil, rate, step) = (d.replay?, d.script_rate?, d.script_step_s?);
    let held = match (ceil.batches, ceil.bytes) {
        (Some(n), Some(bytes)) => format!(", {n} cached batches, {}", show_bytes(bytes as f64)),
        _ => String::new(),
    };
    // The same unit for both rates, so the formula reads at the table's precision.
    let unit = Unit::for_values(Quantity::Rate, &[rate, ceil.rate]);
    let costs = if rate >= ceil.rate {
        "nothing measurable: the replay was no faster than your settings".to_string()
    } else {
        format!("{} of your step", show_percent(stall(rate, &ceil)))
    };
    Some(format!(
        "Replay (the loader free{held}): a step of {} against {} with your settings; the loader \
         costs {costs} (stall by difference: 1 − {} ÷ {}).",
        ms(ceil.step_s),
        ms(step),
        unit.show(rate),
        unit.show(ceil.rate)
    ))
}
