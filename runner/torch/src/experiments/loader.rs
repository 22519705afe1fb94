//! The `loader` experiment (a sweep of loader knobs, each configuration
//! trained in both timing modes, cold and steady epochs) and the `stall`
//! experiment (the differential method: compute-only, from host memory, the
//! full pipeline).

use std::sync::{Arc, Mutex};

use stallscope_bundle::{Experiment, ExperimentKind, Run};

use super::common::{GridExperiment, RunCtx};
use super::loader_common::{Common, native_feed, recorded};
use stallscope_core::{
    UnitError,
    grid::{Point, configuration, point_id, points, swept_knobs},
    suite::{EngineName, ExperimentPlan, ExperimentSpec},
};

/// `kind = "loader"`: the knobs swept, across the engines.
pub struct LoaderExperiment {
    common: Common,
    points: Vec<Point>,
    /// Per point: why its engine cannot run here (no Python peers).
    unavailable: Vec<Option<String>>,
}

impl LoaderExperiment {
    pub fn new(plan: &ExperimentPlan, rc: &RunCtx) -> Result<LoaderExperiment, UnitError> {
        let ExperimentSpec::Loader(lp) = &plan.spec else {
            unreachable!("LoaderExperiment::new is called for loader plans only")
        };
        let cuda = rc.device.is_cuda();
        // Prefetching to the device overlaps a copy with compute: on the
        // CPU there is no copy, so only the points without it run.
        let points: Vec<Point> = points(lp)
            .into_iter()
            .filter(|p| cuda || !p.to_device)
            .collect();
        let unavailable = points
            .iter()
            .map(|p| match p.engine {
                EngineName::Native => None,
                e => stallscope_peers::available(e).err(),
            })
            .collect();
        Ok(LoaderExperiment {
            common: Common::new(plan, lp, rc)?,
            points,
            unavailable,
        })
    }
}

impl GridExperiment for LoaderExperiment {
    fn skeleton(&self) -> Experiment {
        let lp = &self.common.plan;
        let mut swept = swept_knobs(lp);
        if !self.common.cuda {
            swept.retain(|k| k != "prefetch_to_device");
        }
        let pin_note = self.common.pin_note.as_deref();
        let configurations = self
            .points
            .iter()
            .zip(&self.unavailable)
            .map(|(&p, why)| {
                let mut c = configuration(lp, p, pin_note, why.as_deref(), self.common.cuda);
                if let Some(b) = self.common.batch_bytes() {
                    c = c.with_batch_bytes(b);
                }
                if !self.common.cuda {
                    c.params.remove("prefetch_to_device");
                }
                c
            })
            .collect::<Vec<_>>();
        let engines = lp
            .engines
            .iter()
            .map(|e| match e {
                EngineName::Native => "the native loader (thread workers share the runner's process; process workers run the small stallscope-loader-worker binary, no libtorch, and hand batches over through POSIX shared memory; workers take batches round-robin, each holding at most `prefetch` batches ahead)",
                EngineName::Pytorch => "PyTorch's torch.utils.data.DataLoader in the Python harness (num_workers, prefetch_factor, persistent_workers, pin_memory, the start method, and with batched_fetch the Dataset's __getitems__)",
                EngineName::Spdl => "SPDL's pipeline in the Python harness (a per-sample stage of `workers` concurrency on its thread pool, or on a process pool with worker_kinds processes, then batching; `prefetch` batches buffered at the sink)",
                EngineName::Dali => "NVIDIA DALI's pipeline in the Python harness, through its PyTorch iterator (an external source over the same batches; `workers` is its num_threads, `prefetch` its queue depth; images decoded, resized, cropped and normalised by DALI's CPU operators, or by nvJPEG and GPU operators with dali_device = mixed)",
                EngineName::Nodes => "torchdata.nodes in the Python harness (a sampler node over the same batches, a ParallelMapper of `workers` threads or processes that fetches and collates whole batches, PinMemory, then a Prefetcher of `prefetch` batches)",
            })
            .collect::<Vec<_>>()
            .join("; ");
        Experiment {
            description: Some(format!(
                "Each configuration {} for whole epochs over {} ({}) in both timing modes; epoch 0 of each repeat is cold (worker start-up included), later epochs steady. Engines: {engines}. Every engine takes the same batches of the same samples in the same order; delivery is {}.",
                match &lp.python_model {
                    _ if lp.loader_only => "only reads the loader (model = none)".to_string(),
                    Some(m) => format!("trains your own model ({})", m.factory),
                    None => format!("trains the {}", lp.model.name()),
                },
                if self.common.spec.is_some() {
                    format!("{} samples", self.common.samples)
                } else {
                    "the Dataset".into()
                },
                self.common.data_source,
                if lp.in_order {
                    "in sampler order"
                } else {
                    "in finishing order (native)"
                },
            )),
            swept,
            settings: self.common.settings(),
            baseline: configurations.first().map(|c| c.id.clone()),
            not_applicable: None,
            configurations,
            ..Experiment::new(
                self.common.id.clone(),
                ExperimentKind::Loader,
                self.common.title.clone().unwrap_or_else(|| {
                    "Loader knobs: workers, kind, prefetch, persistence, pinning".into()
                }),
            )
        }
    }

    fn epochs_per_unit(&self) -> u64 {
        2 * u64::from(self.common.epochs)
    }

    /// The user's model, once the harness has built it.
    fn arrange(&self, experiment: &mut Experiment) {
        if self.common.plan.python_model.is_some() {
            self.common.built_model_settings(&mut experiment.settings);
        }
    }

    fn run_unit(&mut self, index: usize, repeat: u32, rc: &RunCtx) -> Result<Vec<Run>, UnitError> {
        let p = self.points[index];
        let common = &self.common;
        let id = point_id(p);
        if p.engine != EngineName::Native {
            return super::peer::run_unit(common, p, &id, repeat, rc);
        }
        let last_error = Arc::new(Mutex::new(None));
        let mut make_feed = || native_feed(common, p, &id, &last_error);
        common
            .train_ahead(rc, &id, repeat, &mut make_feed, p.pinned, p.to_device)
            .map_err(|e| recorded(e, &last_error))
    }
}

pub use super::stall::StallExperiment;
