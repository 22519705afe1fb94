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
use stallscope_bundle::{Configuration, Experiment, ExperimentKind, ParamValue};

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
