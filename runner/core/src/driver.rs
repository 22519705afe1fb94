//! The one experiment driver. Every back end (libtorch, wgpu; the Python
//! engines run inside libtorch's loader sweep) and `stallscope job` hand it
//! experiments that run one unit at a time; the driver alone owns the order
//! of repeats (ascending, descending, ascending, …), panic isolation per
//! configuration, Ctrl-C, the save after every unit, adaptive experiments
//! (the OOM probe asks for its next configuration from what was measured)
//! and the record of an experiment that is not applicable. It knows no device.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};

use stallscope_bundle::{Bundle, Configuration, Experiment, Failure, Run, TimingMode};

use crate::measure::LoopError;

/// Progress reporting (a terminal bar, or nothing).
pub trait Progress {
    /// A timed epoch is about to start.
    fn epoch(
        &self,
        experiment: &str,
        configuration: &str,
        repeat: u32,
        mode: TimingMode,
        epoch: u32,
    );
    /// A timed epoch ended.
    fn epoch_done(&self);
    /// `epochs` more timed epochs are planned.
    fn planned(&self, _epochs: u64) {}
}

/// Progress that reports nothing (tests, and back ends setting up).
pub struct NoProgress;

impl Progress for NoProgress {
    fn epoch(&self, _: &str, _: &str, _: u32, _: TimingMode, _: u32) {}
    fn epoch_done(&self) {}
}

/// Why a unit did not finish.
#[derive(Debug, thiserror::Error)]
pub enum UnitError {
    #[error("interrupted (Ctrl-C)")]
    Interrupted,
    #[error("{0}")]
    Failed(String),
    /// A failure recorded as it is (a loader worker's names worker and
    /// sample; an out-of-memory error carries its numbers).
    #[error("{0:?}")]
    Recorded(Box<Failure>),
    /// The unit measured some epochs, then failed (a harness that died
    /// mid-unit): the epochs are kept with the failure.
    #[error("{failure:?} after {} runs", runs.len())]
    Partial {
        runs: Vec<Run>,
        failure: Box<Failure>,
    },
}

/// An epoch's stop as the unit's.
impl From<LoopError> for UnitError {
    fn from(e: LoopError) -> Self {
        match e {
            LoopError::Interrupted => UnitError::Interrupted,
            LoopError::Comm(failure) | LoopError::Recorded(failure) => UnitError::Recorded(failure),
            LoopError::Failed(message) => UnitError::Failed(message),
        }
    }
}

/// What the driver gives every unit.
pub struct UnitCtx<'a> {
    /// Set by Ctrl-C; back ends check it between steps.
    pub stop: &'a AtomicBool,
    pub progress: &'a dyn Progress,
    /// Test-only: panic inside this configuration (`STALLSCOPE_INJECT_PANIC`).
    pub inject_panic: Option<String>,
}

/// An experiment as a back end runs it: its bundle skeleton, then one
/// (configuration, repeat) unit at a time. Back ends return raw runs; the
/// driver records them, or the failure.
pub trait Driven {
    /// The bundle experiment with its configurations and no runs yet; with
    /// `not_applicable` set (and no configuration) when this back end cannot
    /// run it.
    fn skeleton(&self) -> Experiment;
    /// Timed epochs per unit, for the progress bar.
    fn epochs_per_unit(&self) -> u64;
    /// Run configuration `index` once (repeat `repeat`), returning its runs.
    fn run_unit(&mut self, index: usize, repeat: u32, cx: &UnitCtx) -> Result<Vec<Run>, UnitError>;
    /// Adaptive experiments: the next configuration to append and run once,
    /// chosen from what the experiment measured so far; `None` when done.
    /// Grid experiments have all theirs in the skeleton.
    fn next_configuration(&mut self, _measured: &Experiment) -> Option<Configuration> {
        None
    }
    /// After every unit: put into the experiment what the units taught
    /// (the OOM probe sorts its configurations by batch size; a loader
    /// sweep on the user's own model records the model the harness built).
    fn arrange(&self, _experiment: &mut Experiment) {}
    /// After a panic: release what the back end holds (the CUDA cache).
    fn recover(&self) {}
}

/// How a driven experiment ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every unit ran (some configurations may have recorded failures).
    Finished { failures: usize },
    /// Ctrl-C: everything finished before is kept.
    Interrupted,
}

/// An experiment a back end cannot run: its skeleton says why.
pub struct NotApplicable {
    experiment: Experiment,
}

impl NotApplicable {
    /// `experiment` must carry `not_applicable`.
    pub fn new(experiment: Experiment) -> Self {
        debug_assert!(experiment.not_applicable.is_some());
        NotApplicable { experiment }
    }
}

impl Driven for NotApplicable {
    fn skeleton(&self) -> Experiment {
        self.experiment.clone()
    }
    fn epochs_per_unit(&self) -> u64 {
        0
    }
    fn run_unit(&mut self, _: usize, _: u32, _: &UnitCtx) -> Result<Vec<Run>, UnitError> {
        Err(UnitError::Failed("not applicable: nothing to run".into()))
    }
}

/// The configuration order of a repeat: ascending, descending, ascending, …
pub fn repeat_order(configs: usize, repeat: u32) -> Vec<usize> {
    let mut v: Vec<usize> = (0..configs).collect();
    if repeat % 2 == 1 {
        v.reverse();
    }
    v
}

/// Run every unit of `bundle.experiments[exp_index]` (already holding the
/// skeleton), saving after each.
pub fn drive(
    bundle: &mut Bundle,
    exp_index: usize,
    driven: &mut dyn Driven,
    repeats: u32,
    cx: &UnitCtx,
    save: &mut dyn FnMut(&Bundle),
) -> Outcome {
    if bundle.experiments[exp_index].not_applicable.is_some() {
        save(bundle);
        return Outcome::Finished { failures: 0 };
    }
    let mut failures = 0;
    let configs = bundle.experiments[exp_index].configurations.len();
    for repeat in 0..repeats {
        let all: Vec<usize> = (0..configs).collect();
        match drive_repeat(bundle, exp_index, driven, repeat, &all, cx, save) {
            Outcome::Finished { failures: f } => failures += f,
            Outcome::Interrupted => return Outcome::Interrupted,
        }
    }
    adaptive(bundle, exp_index, driven, cx, save, failures)
}

/// One more repeat (`repeat`) of the configurations `only` (indices into
/// the experiment's), in the driver's alternating order for that repeat,
/// saving after each unit: how an experiment's repeats grow until its
/// answer is resolved (`stallscope job`).
pub fn drive_repeat(
    bundle: &mut Bundle,
    exp_index: usize,
    driven: &mut dyn Driven,
    repeat: u32,
    only: &[usize],
    cx: &UnitCtx,
    save: &mut dyn FnMut(&Bundle),
) -> Outcome {
    let mut failures = 0;
    let configs = bundle.experiments[exp_index].configurations.len();
    {
        for ci in repeat_order(configs, repeat)
            .into_iter()
            .filter(|ci| only.contains(ci))
        {
            let config = &bundle.experiments[exp_index].configurations[ci];
            // Every slot, run or skipped, so the ranks' positions agree while
            // they are in step (a rank that skips alone is found out).
            crate::ranks::enter_unit(&format!(
                "{}/{} repeat {repeat}",
                bundle.experiments[exp_index].id, config.id
            ));
            // A failed configuration is not retried; one whose back end (or
            // DALI's decoder placement) is not applicable here has nothing
            // to run.
            if config.failure.is_some() || config.cannot_run_here().is_some() {
                continue;
            }
            let step = run_one(bundle, exp_index, ci, repeat, driven, cx);
            driven.arrange(&mut bundle.experiments[exp_index]);
            match step {
                Step::Interrupted => {
                    save(bundle);
                    return Outcome::Interrupted;
                }
                Step::Failed => {
                    failures += 1;
                    let config = &bundle.experiments[exp_index].configurations[ci];
                    if let Some(f) = &config.failure {
                        crate::ranks::unit_failed(f);
                    }
                }
                Step::Done => {}
            }
            save(bundle);
        }
    }
    Outcome::Finished { failures }
}

/// Adaptive experiments: one configuration at a time, each run once.
fn adaptive(
    bundle: &mut Bundle,
    exp_index: usize,
    driven: &mut dyn Driven,
    cx: &UnitCtx,
    save: &mut dyn FnMut(&Bundle),
    mut failures: usize,
) -> Outcome {
    loop {
        if cx.stop.load(Ordering::Relaxed) {
            return Outcome::Interrupted;
        }
        let Some(config) = driven.next_configuration(&bundle.experiments[exp_index]) else {
            break;
        };
        let experiment = &mut bundle.experiments[exp_index];
        experiment.configurations.push(config);
        let ci = experiment.configurations.len() - 1;
        crate::ranks::enter_unit(&format!(
            "{}/{} (adaptive)",
            experiment.id, experiment.configurations[ci].id
        ));
        let step = run_one(bundle, exp_index, ci, 0, driven, cx);
        driven.arrange(&mut bundle.experiments[exp_index]);
        save(bundle);
        match step {
            Step::Interrupted => return Outcome::Interrupted,
            Step::Failed => failures += 1,
            Step::Done => {}
        }
    }
    Outcome::Finished { failures }
}

enum Step {
    Done,
    Failed,
    Interrupted,
}

/// One unit, isolated: its runs, or its failure, recorded on the configuration.
fn run_one(
    bundle: &mut Bundle,
    exp_index: usize,
    ci: usize,
    repeat: u32,
    driven: &mut dyn Driven,
    cx: &UnitCtx,
) -> Step {
    if cx.stop.load(Ordering::Relaxed) {
        return Step::Interrupted;
    }
    let cid = bundle.experiments[exp_index].configurations[ci].id.clone();
    let result = catch_unwind(AssertUnwindSafe(|| {
        if cx.inject_panic.as_deref() == Some(cid.as_str()) {
            panic!("injected panic in configuration {cid} (STALLSCOPE_INJECT_PANIC)");
        }
        driven.run_unit(ci, repeat, cx)
    }));
    let config = &mut bundle.experiments[exp_index].configurations[ci];
    match result {
        Ok(Ok(runs)) if runs.iter().any(|r| run_steps(r) == Some(0)) => {
            // An epoch with no batch measured nothing: a failure with the
            // reason, never a run with no stages and a rate of 0.
            config.failure = Some(Failure::Error {
                message: "an epoch held no batch (fewer samples than one batch, with drop_last); \
                          nothing was measured"
                    .into(),
            });
            Step::Failed
        }
        Ok(Ok(runs)) => {
            config.runs.extend(runs);
            Step::Done
        }
        Ok(Err(UnitError::Interrupted)) => {
            config.failure = Some(Failure::Interrupted {
                message: format!(
                    "{} during repeat {repeat}; the runs of this repeat were abandoned, \
                     earlier repeats are kept",
                    crate::ranks::stop_cause()
                ),
            });
            Step::Interrupted
        }
        Ok(Err(UnitError::Recorded(failure))) => {
            // An out-of-memory error is a result (the OOM probe looks for
            // it), not a failure of the run.
            let oom = matches!(*failure, Failure::OutOfMemory(_));
            config.failure = Some(*failure);
            if oom { Step::Done } else { Step::Failed }
        }
        Ok(Err(UnitError::Failed(message))) => {
            config.failure = Some(Failure::Error { message });
            Step::Failed
        }
        Ok(Err(UnitError::Partial { runs, failure })) => {
            config.runs.extend(runs);
            config.failure = Some(*failure);
            Step::Failed
        }
        Err(payload) => {
            config.failure = Some(Failure::Panic {
                message: panic_message(&payload),
            });
            driven.recover();
            Step::Failed
        }
    }
}

/// Steps (or copies) a run timed, from whichever timing mode it carries.
fn run_steps(run: &Run) -> Option<u64> {
    run.whole_run
        .as_ref()
        .and_then(|w| w.steps)
        .or_else(|| run.diagnostic.as_ref().and_then(|d| d.steps))
}

/// The text of a panic payload.
pub fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic with a non-text payload".into())
}

/// Drive one experiment alone (no suite, no file, no Ctrl-C): its skeleton
/// filled in. For back ends' own tests.
pub fn drive_alone(driven: &mut dyn Driven, repeats: u32) -> (Experiment, Outcome) {
    let stop = AtomicBool::new(false);
    let cx = UnitCtx {
        stop: &stop,
        progress: &NoProgress,
        inject_panic: None,
    };
    let mut bundle: Bundle = serde_json::from_value(serde_json::json!({
        "schema_version": stallscope_bundle::SchemaVersion::CURRENT,
        "id": "alone", "title": "alone", "created_at": "2026-12-01T00:00:00Z",
        "provenance": {"kind": "measured"}, "environment": {},
        "status": {"state": "running"}
    }))
    .expect("a minimal bundle");
    bundle.experiments.push(driven.skeleton());
    let outcome = drive(&mut bundle, 0, driven, repeats, &cx, &mut |_| {});
    (bundle.experiments.remove(0), outcome)
}

#[cfg(test)]
mod tests;
