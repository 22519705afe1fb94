//! The libtorch back end's experiments: each kind builds its bundle
//! [`Experiment`] skeleton and runs one (configuration, repeat) unit at a
//! time; [`TorchBackend`] hands them to the one driver
//! (`stallscope_core::drive`), which owns the order of repeats, panic
//! isolation, Ctrl-C and saving.

pub mod batch_sweep;
mod common;
pub mod compute;
pub mod loader;
mod loader_common;
pub mod native_feed;
pub mod oom_probe;
mod peer;
mod peer_source;
pub mod source_plan;
mod stall;
pub mod transfer;

use std::path::Path;
use std::sync::atomic::AtomicBool;

use stallscope_bundle::{Environment, Experiment, Run, Seeds};

use crate::device::DeviceCtx;
use common::{GridExperiment, RunCtx};
use stallscope_core::{
    Backend, Driven, NoProgress, UnitCtx, UnitError,
    suite::{ExperimentPlan, ExperimentSpec, Plan},
};

/// The libtorch back end: CUDA or the CPU through the linked libtorch.
pub struct TorchBackend<'a> {
    pub device: &'a DeviceCtx,
    pub data_dir: Option<&'a Path>,
    pub seeds: Seeds,
}

static NEVER_STOP: AtomicBool = AtomicBool::new(false);

impl TorchBackend<'_> {
    /// The context of one unit: this back end's device and seeds, the
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
    backend: &'a TorchBackend<'a>,
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
        let rc = self.backend.unit_ctx(cx);
        self.grid.run_unit(index, repeat, &rc)
    }
    fn arrange(&self, experiment: &mut Experiment) {
        self.grid.arrange(experiment);
    }
    fn recover(&self) {
        self.backend.device.empty_cache();
    }
}

impl Backend for TorchBackend<'_> {
    fn environment(&self) -> Environment {
        crate::environment::environment(self.device)
    }

    fn device_name(&self) -> String {
        self.device.info().name
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
        Ok(Box::new(TorchGrid {
            backend: self,
            grid,
        }))
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
            Box::new(crate::experiments::loader::LoaderExperiment::new(plan, rc)?)
        }
        ExperimentSpec::Stall(_) => {
            Box::new(crate::experiments::loader::StallExperiment::new(plan, rc)?)
        }
    })
}
