//! Experiments: each kind builds its bundle [`Experiment`] skeleton and runs
//! one (configuration, repeat) unit at a time; the driver here orders the
//! repeats ascending/descending/ascending, isolates panics and failures per
//! configuration, honours Ctrl-C and saves the bundle after every unit.

pub mod batch_sweep;
pub mod compute;
pub mod oom_probe;
pub mod transfer;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use stallscope_bundle::{
    Bundle, Configuration, Experiment, Failure, ParamValue, Run, Seeds, TimingMode,
};

use crate::device::DeviceCtx;
use crate::feed::Feed;
use crate::models::{ModelSpec, Trainer};
use crate::suite::{ExperimentPlan, ExperimentSpec};
use crate::train::{CopyMode, EpochSlot, LoopError, run_epoch, warm_up};

/// What every experiment needs from the run.
pub struct RunCtx<'a> {
    pub device: &'a DeviceCtx,
    pub stop: &'a AtomicBool,
    pub data_dir: Option<&'a Path>,
    pub seeds: Seeds,
    pub progress: &'a dyn Progress,
    /// Test-only: panic inside this configuration (`STALLSCOPE_INJECT_PANIC`).
    pub inject_panic: Option<String>,
}

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

/// Why a unit did not finish.
#[derive(Debug, thiserror::Error)]
pub enum UnitError {
    #[error("interrupted (Ctrl-C)")]
    Interrupted,
    #[error("{0}")]
    Failed(String),
    /// A failure recorded as it is (a loader worker's names worker and sample).
    #[error("{0:?}")]
    Recorded(Box<Failure>),
}

impl From<LoopError> for UnitError {
    fn from(e: LoopError) -> Self {
        match e {
            LoopError::Interrupted => UnitError::Interrupted,
            other => UnitError::Failed(other.to_string()),
        }
    }
}

impl From<tch::TchError> for UnitError {
    fn from(e: tch::TchError) -> Self {
        UnitError::Failed(e.to_string())
    }
}

/// An experiment with a fixed grid of configurations.
pub trait GridExperiment {
    /// The bundle experiment with its configurations and no runs yet.
    fn skeleton(&self) -> Experiment;
    /// Timed epochs per (configuration, repeat), for the progress bar.
    fn epochs_per_unit(&self) -> u64;
    /// Run configuration `index` once (repeat `repeat`), returning its runs.
    fn run_unit(&mut self, index: usize, repeat: u32, rc: &RunCtx) -> Result<Vec<Run>, UnitError>;
}

/// How a driven experiment ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every unit ran (some configurations may have recorded failures).
    Finished { failures: usize },
    /// Ctrl-C: everything finished before is kept.
    Interrupted,
}

/// Build the experiment for a plan entry.
pub fn grid_for(
    plan: &ExperimentPlan,
    rc: &RunCtx,
) -> Result<Option<Box<dyn GridExperiment>>, UnitError> {
    Ok(match &plan.spec {
        ExperimentSpec::Compute { .. } => Some(Box::new(compute::Compute::new(plan, rc))),
        ExperimentSpec::Transfer { .. } => Some(Box::new(transfer::Transfer::new(plan, rc))),
        ExperimentSpec::BatchSweep { .. } => {
            Some(Box::new(batch_sweep::BatchSweep::new(plan, rc)?))
        }
        ExperimentSpec::OomProbe { .. } => None,
        ExperimentSpec::Loader(_) => Some(Box::new(
            crate::loader::experiment::LoaderExperiment::new(plan, rc)?,
        )),
        ExperimentSpec::Stall(_) => Some(Box::new(
            crate::loader::experiment::StallExperiment::new(plan, rc)?,
        )),
    })
}

/// The configuration order of a repeat: ascending, descending, ascending, …
pub fn order(configs: usize, repeat: u32) -> Vec<usize> {
    let mut v: Vec<usize> = (0..configs).collect();
    if repeat % 2 == 1 {
        v.reverse();
    }
    v
}

/// Run every unit of a grid experiment, saving after each.
pub fn drive(
    bundle: &mut Bundle,
    exp_index: usize,
    grid: &mut dyn GridExperiment,
    repeats: u32,
    rc: &RunCtx,
    save: &mut dyn FnMut(&Bundle),
) -> Outcome {
    let configs = bundle.experiments[exp_index].configurations.len();
    let mut failures = 0;
    for repeat in 0..repeats {
        for ci in order(configs, repeat) {
            if bundle.experiments[exp_index].configurations[ci]
                .failure
                .is_some()
            {
                continue;
            }
            if rc.stop.load(Ordering::Relaxed) {
                return Outcome::Interrupted;
            }
            let cid = bundle.experiments[exp_index].configurations[ci].id.clone();
            let result = catch_unwind(AssertUnwindSafe(|| {
                if rc.inject_panic.as_deref() == Some(cid.as_str()) {
                    panic!("injected panic in configuration {cid} (STALLSCOPE_INJECT_PANIC)");
                }
                grid.run_unit(ci, repeat, rc)
            }));
            let config = &mut bundle.experiments[exp_index].configurations[ci];
            match result {
                Ok(Ok(runs)) if runs.iter().any(|r| run_steps(r) == Some(0)) => {
                    // An epoch with no batch measured nothing: a failure with
                    // the reason, never a run with no stages and a rate of 0.
                    failures += 1;
                    config.failure = Some(Failure::Error {
                        message: "an epoch held no batch (fewer samples than one batch, \
                                  with drop_last); nothing was measured"
                            .into(),
                    });
                }
                Ok(Ok(runs)) => config.runs.extend(runs),
                Ok(Err(UnitError::Interrupted)) => {
                    config.failure = Some(Failure::Interrupted {
                        message: format!(
                            "Ctrl-C during repeat {repeat}; the runs of this repeat were abandoned, earlier repeats are kept"
                        ),
                    });
                    save(bundle);
                    return Outcome::Interrupted;
                }
                Ok(Err(UnitError::Recorded(failure))) => {
                    failures += 1;
                    config.failure = Some(*failure);
                }
                Ok(Err(UnitError::Failed(message))) => {
                    failures += 1;
                    config.failure = Some(Failure::Error { message });
                }
                Err(payload) => {
                    failures += 1;
                    config.failure = Some(Failure::Panic {
                        message: panic_message(&payload),
                    });
                    rc.device.empty_cache();
                }
            }
            save(bundle);
        }
    }
    Outcome::Finished { failures }
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

/// The shared unit of the training experiments: for each timing mode a fresh
/// model (same initial weights) and feed, one warm-up step, then `epochs`
/// timed epochs (the first cold, the rest steady).
#[allow(clippy::too_many_arguments)]
pub fn train_unit(
    rc: &RunCtx,
    exp_id: &str,
    config_id: &str,
    repeat: u32,
    epochs: u32,
    model: ModelSpec,
    batch_size: i64,
    copy: CopyMode,
    make_feed: &mut dyn FnMut() -> Result<Box<dyn Feed>, UnitError>,
) -> Result<Vec<Run>, UnitError> {
    let mut runs = Vec::new();
    for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
        let mut trainer = Trainer::new(
            model,
            model.default_optimizer(),
            rc.device.device,
            rc.seeds.weights,
        )?;
        let mut feed = make_feed()?;
        warm_up(&mut trainer, rc.device, batch_size)?;
        for epoch in 0..epochs {
            rc.progress
                .epoch(exp_id, config_id, repeat, mode.clone(), epoch);
            rc.device.reset_peaks();
            let slot = EpochSlot {
                mode: mode.clone(),
                repeat,
                epoch,
            };
            let run = run_epoch(&mut trainer, feed.as_mut(), rc.device, copy, slot, rc.stop)?;
            rc.progress.epoch_done();
            runs.push(run);
        }
        drop(feed);
        drop(trainer);
        rc.device.empty_cache();
    }
    Ok(runs)
}

/// One configuration per batch size (id `bs{b}`, param `batch_size`), each
/// batch `bytes_per_sample × b` bytes; runs are filled in as units finish.
pub fn batch_size_configurations(batch_sizes: &[i64], bytes_per_sample: u64) -> Vec<Configuration> {
    batch_sizes
        .iter()
        .map(|&b| {
            Configuration::new(format!("bs{b}"), batch_label(b))
                .with_param("batch_size", ParamValue::Int(b))
                .with_batch_bytes(bytes_per_sample * b as u64)
        })
        .collect()
}

/// "batch 8,192".
pub fn batch_label(b: i64) -> String {
    let s = b.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("batch {out}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_alternate() {
        assert_eq!(order(3, 0), vec![0, 1, 2]);
        assert_eq!(order(3, 1), vec![2, 1, 0]);
        assert_eq!(order(3, 2), vec![0, 1, 2]);
        assert_eq!(batch_label(8192), "batch 8,192");
        assert_eq!(batch_label(32), "batch 32");
        assert_eq!(batch_label(131072), "batch 131,072");
    }
}
