//! The libtorch engine's experiments: each kind builds its bundle
//! [`Experiment`] skeleton and runs one (configuration, repeat) unit at a
//! time; [`TorchEngine`] hands them to the one driver (`crate::driver`),
//! which owns the order of repeats, panic isolation, Ctrl-C and saving.

pub mod batch_sweep;
pub mod compute;
pub mod oom_probe;
pub mod transfer;

use std::path::Path;
use std::sync::atomic::AtomicBool;

use stallscope_bundle::{
    Configuration, Environment, Experiment, ParamValue, Run, Seeds, TimingMode,
};

use crate::device::DeviceCtx;
use crate::driver::{Driven, NoProgress, UnitCtx};
pub use crate::driver::{Outcome, Progress, UnitError, order, panic_message};
use crate::engine::Engine;
use crate::feed::Feed;
use crate::models::{ModelSpec, Trainer};
use crate::suite::{ExperimentPlan, ExperimentSpec, Plan};
use crate::train::{CopyMode, EpochSlot, LoopError, run_epoch, warm_up};

/// What every libtorch experiment needs from the run.
pub struct RunCtx<'a> {
    pub device: &'a DeviceCtx,
    pub stop: &'a AtomicBool,
    pub data_dir: Option<&'a Path>,
    pub seeds: Seeds,
    pub progress: &'a dyn Progress,
}

impl From<LoopError> for UnitError {
    fn from(e: LoopError) -> Self {
        match e {
            LoopError::Interrupted => UnitError::Interrupted,
            LoopError::Comm(failure) => UnitError::Recorded(failure),
            other => UnitError::Failed(other.to_string()),
        }
    }
}

impl From<tch::TchError> for UnitError {
    fn from(e: tch::TchError) -> Self {
        UnitError::Failed(e.to_string())
    }
}

/// A libtorch experiment with a fixed grid of configurations.
pub trait GridExperiment {
    /// The bundle experiment with its configurations and no runs yet.
    fn skeleton(&self) -> Experiment;
    /// Timed epochs per (configuration, repeat), for the progress bar.
    fn epochs_per_unit(&self) -> u64;
    /// Run configuration `index` once (repeat `repeat`), returning its runs.
    fn run_unit(&mut self, index: usize, repeat: u32, rc: &RunCtx) -> Result<Vec<Run>, UnitError>;
}

/// The libtorch engine: CUDA or the CPU through the linked libtorch.
pub struct TorchEngine<'a> {
    pub device: &'a DeviceCtx,
    pub data_dir: Option<&'a Path>,
    pub seeds: Seeds,
}

static NEVER_STOP: AtomicBool = AtomicBool::new(false);

impl TorchEngine<'_> {
    /// The context of one unit: this engine's device and seeds, the
    /// driver's stop flag and progress.
    fn unit_ctx<'b>(&'b self, cx: &'b UnitCtx) -> RunCtx<'b> {
        RunCtx {
            device: self.device,
            stop: cx.stop,
            data_dir: self.data_dir,
            seeds: self.seeds,
            progress: cx.progress,
        }
    }
}

/// A grid experiment as the driver sees it.
struct TorchGrid<'a> {
    engine: &'a TorchEngine<'a>,
    grid: Box<dyn GridExperiment + 'a>,
}

impl Driven for TorchGrid<'_> {
    fn skeleton(&self) -> Experiment {
        self.grid.skeleton()
    }
    fn epochs_per_unit(&self) -> u64 {
        self.grid.epochs_per_unit()
    }
    fn run_unit(&mut self, index: usize, repeat: u32, cx: &UnitCtx) -> Result<Vec<Run>, UnitError> {
        let rc = self.engine.unit_ctx(cx);
        self.grid.run_unit(index, repeat, &rc)
    }
    fn recover(&self) {
        self.engine.device.empty_cache();
    }
}

impl Engine for TorchEngine<'_> {
    fn environment(&self) -> Environment {
        crate::envinfo::environment(self.device)
    }

    fn device_name(&self) -> String {
        self.device.info().name
    }

    fn notes(&self) -> Vec<String> {
        if crate::device::reset_host_peak_rss() {
            Vec::new()
        } else {
            vec!["Host peak RSS could not be reset between epochs (/proc/self/clear_refs refused): each figure is the process's peak so far.".into()]
        }
    }

    fn experiment<'a>(
        &'a self,
        plan: &'a ExperimentPlan,
        _suite: &'a Plan,
    ) -> Result<Box<dyn Driven + 'a>, UnitError> {
        if let ExperimentSpec::OomProbe { .. } = plan.spec {
            return Ok(Box::new(oom_probe::OomProbe::new(
                plan,
                self.device,
                self.seeds.weights,
            )));
        }
        // Experiments are built before any unit runs: nothing to stop or
        // report yet.
        let setup = RunCtx {
            device: self.device,
            stop: &NEVER_STOP,
            data_dir: self.data_dir,
            seeds: self.seeds,
            progress: &NoProgress,
        };
        let grid = grid_for(plan, &setup)?;
        Ok(Box::new(TorchGrid { engine: self, grid }))
    }
}

/// Build the grid experiment of a plan entry (every kind but the OOM probe).
fn grid_for<'a>(
    plan: &ExperimentPlan,
    rc: &RunCtx,
) -> Result<Box<dyn GridExperiment + 'a>, UnitError> {
    Ok(match &plan.spec {
        ExperimentSpec::Compute { .. } => Box::new(compute::Compute::new(plan, rc)),
        ExperimentSpec::Transfer { .. } => Box::new(transfer::Transfer::new(plan, rc)),
        ExperimentSpec::BatchSweep { .. } => Box::new(batch_sweep::BatchSweep::new(plan, rc)?),
        ExperimentSpec::OomProbe { .. } => {
            unreachable!("the OOM probe is an adaptive experiment, built apart")
        }
        ExperimentSpec::Loader(_) => {
            Box::new(crate::loader::experiment::LoaderExperiment::new(plan, rc)?)
        }
        ExperimentSpec::Stall(_) => {
            Box::new(crate::loader::experiment::StallExperiment::new(plan, rc)?)
        }
    })
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

/// One unit of `model = "none"`: per timing mode a fresh feed, then
/// `epochs` loops over the loader alone (no trainer, no warm-up step).
pub fn loader_only_unit(
    rc: &RunCtx,
    exp_id: &str,
    config_id: &str,
    repeat: u32,
    epochs: u32,
    make_feed: &mut dyn FnMut() -> Result<Box<dyn Feed>, UnitError>,
) -> Result<Vec<Run>, UnitError> {
    let mut runs = Vec::new();
    for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
        let mut feed = make_feed()?;
        for epoch in 0..epochs {
            rc.progress
                .epoch(exp_id, config_id, repeat, mode.clone(), epoch);
            rc.device.reset_peaks();
            let slot = EpochSlot {
                mode: mode.clone(),
                repeat,
                epoch,
            };
            let mut run = crate::train::loader_only_epoch(feed.as_mut(), slot, rc.stop)?;
            // The device's counters beside the worker processes' peak the
            // epoch's watch recorded, which this must not drop.
            let workers_peak_rss_bytes = run.memory.and_then(|m| m.workers_peak_rss_bytes);
            run.memory = Some(stallscope_bundle::Memory {
                workers_peak_rss_bytes,
                ..rc.device.memory()
            });
            rc.progress.epoch_done();
            runs.push(run);
        }
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
    fn batch_labels_group_thousands() {
        assert_eq!(batch_label(8192), "batch 8,192");
        assert_eq!(batch_label(32), "batch 32");
        assert_eq!(batch_label(131072), "batch 131,072");
    }
}
