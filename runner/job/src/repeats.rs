//! Repeats that grow until the answer is resolved: after the grid's
//! repeats, while some configuration's ratio to your settings straddles the
//! A/A noise floor (`shared`'s `resolution`), one more repeat of your
//! settings, their A/A copy and the open configurations, until it is
//! resolved or the budget (`--max-repeats`, `--max-minutes`) is spent. The
//! job experiment then carries the floor, the repeats run and why it
//! stopped, and the person at the terminal reads the same.

use std::time::Instant;

use stallscope_bundle::ParamValue;
use stallscope_bundle::analysis::{
    JOB_SCRIPT_AGAIN_ID, JOB_SCRIPT_ID, Resolution, job_noise_floor, resolution,
};

use crate::options::{JobEvents, JobOptions};
use crate::session::Session;
use crate::unit::JobExperiment;

/// Grow the repeats of the job experiment at `index` (module rule).
pub(crate) fn grow(
    s: &mut Session,
    job: &mut JobExperiment,
    index: usize,
    args: &JobOptions,
    events: &dyn JobEvents,
) {
    let started = Instant::now();
    let mut repeats = args.repeats;
    let why = loop {
        let r = resolution(&s.bundle.experiments[index], JOB_SCRIPT_ID, &[]);
        let crashed = own_crashed(&s.bundle.experiments[index]);
        if let Some(why) = stop_here(&r, repeats, args, started, s.interrupted, crashed) {
            break why;
        }
        let only = next_round(s, index, &r);
        if !s.drive_repeat(job, index, repeats, &only) {
            break format!("{}; stopped after {repeats} repeats (Ctrl-C)", r.reason);
        }
        repeats += 1;
    };
    let e = &mut s.bundle.experiments[index];
    e.noise_floor = job_noise_floor(e);
    e.settings
        .insert("repeats_run".into(), ParamValue::from(repeats));
    e.settings
        .insert("resolution".into(), ParamValue::from(why.as_str()));
    events.note(&format!("stallscope job: {why}"));
    s.save();
}

/// Why the repeats stop now, or `None` to run one more.
fn stop_here(
    r: &Resolution,
    repeats: u32,
    args: &JobOptions,
    started: Instant,
    interrupted: bool,
    own_crashed: bool,
) -> Option<String> {
    let reason = &r.reason;
    if own_crashed {
        return Some(format!(
            "no noise floor: your settings do not run here, so repeats would tell nothing more \
             after {repeats}"
        ));
    }
    if interrupted {
        return Some(format!(
            "{reason}; stopped after {repeats} repeats (Ctrl-C)"
        ));
    }
    if r.resolved {
        return Some(format!("{reason} after {repeats} repeats"));
    }
    if repeats >= args.max_repeats {
        return Some(format!(
            "{reason} after {repeats} repeats: the budget of --max-repeats {} is spent",
            args.max_repeats
        ));
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    match args.max_minutes {
        Some(m) if minutes >= m => Some(format!(
            "{reason} after {repeats} repeats: the budget of --max-minutes {m} is spent"
        )),
        _ => None,
    }
}

/// The configurations of the next round: your settings, their A/A copy,
/// and the open ones (every configuration while there is no floor yet).
fn next_round(s: &Session, index: usize, r: &Resolution) -> Vec<usize> {
    let e = &s.bundle.experiments[index];
    e.configurations
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            r.open.is_empty()
                || c.id == JOB_SCRIPT_ID
                || c.id == JOB_SCRIPT_AGAIN_ID
                || r.open.contains(&c.id)
        })
        .map(|(i, _)| i)
        .collect()
}

/// Your settings crashed (before any step or after some): their A/A copy
/// is not run again, so no floor will come of more repeats.
fn own_crashed(e: &stallscope_bundle::Experiment) -> bool {
    e.configuration(JOB_SCRIPT_ID)
        .is_some_and(|c| matches!(c.failure, Some(stallscope_bundle::Failure::Crashed { .. })))
}
