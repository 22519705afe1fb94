//! The `loader` and `stall` experiments on wgpu: the native loader (in the
//! loop, threads or processes; the same sampler and the same bytes as on
//! libtorch) feeds the seeds/000 linear classifier's WGSL step. Each step
//! writes the loader's batch to the device and submits the step, in both
//! timing modes; the driver runs the units.

use stallscope_bundle::{Configuration, Experiment, ParamValue, Run, TimingMode};
use stallscope_loader::{Batch, Loader, LoaderError, SourceSpec};

use super::steps::{Batches, HostBatch, WgpuSteps, loader_failure};
use super::trainer::{LinearTrainer, MAX_CLASSES, initial_weights};
use super::{WgpuCtx, WgpuError};
use stallscope_core::{
    Driven, EpochSlot, ModelSpec, UnitCtx, UnitError,
    grid::{Point, loader_config, points, swept_knobs},
    run_epoch,
    suite::EngineName,
    suite::{DataPlan, ExperimentPlan, ExperimentSpec, LoaderPlan},
};

/// Learning rate of the seeds/000 classifier (SGD 0.01).
const LR: f32 = 0.01;
const NO_PINNING: &str =
    "wgpu stages every host-to-device copy itself: there is no pinned host memory to ask for";

/// A `loader` (the knobs swept) or `stall` (three ways) experiment on wgpu.
pub struct WgpuLoader<'a> {
    ctx: &'a WgpuCtx,
    trainer: LinearTrainer<'a>,
    features: u32,
    weights: Vec<f32>,
    plan: LoaderPlan,
    spec: SourceSpec,
    epochs: u32,
    shuffle_seed: u64,
    /// Loader points (the stall kind has one, run three ways).
    points: Vec<Point>,
    stall: bool,
    experiment: Experiment,
}

/// Why the peers do not run on a wgpu device.
const NO_PEERS: &str = "the peer engines train with PyTorch on the CPU or CUDA, not on a wgpu adapter, so their figures would not compare with this run's: run this suite with --device cpu or cuda";

/// Why wgpu cannot run a loader plan, if it cannot.
pub(crate) fn unsupported(lp: &LoaderPlan) -> Option<String> {
    if lp.loader_only {
        return Some("model = \"none\" times the loader alone, with no device in the loop: run it with --device cpu (the same loop on any machine)".into());
    }
    match (&lp.data, lp.model) {
        (DataPlan::Tensor { .. } | DataPlan::Synthetic { .. }, ModelSpec::Linear { classes, .. })
            if classes <= i64::from(MAX_CLASSES) =>
        {
            None
        }
        _ => Some("the wgpu back end trains the seeds/000 linear classifier on tensor or synthetic sources; image sources need the image CNN on libtorch (run it with --device cpu or cuda)".into()),
    }
}

impl<'a> WgpuLoader<'a> {
    /// `plan` is a loader or stall plan that [`unsupported`] accepts.
    pub fn new(
        ctx: &'a WgpuCtx,
        plan: &ExperimentPlan,
        weight_seed: u64,
        data_seed: u64,
        shuffle_seed: u64,
    ) -> Result<Self, WgpuError> {
        let (lp, stall) = match &plan.spec {
            ExperimentSpec::Loader(lp) => (lp.clone(), false),
            ExperimentSpec::Stall(lp) => (lp.clone(), true),
            _ => unreachable!("WgpuLoader is built for loader and stall plans only"),
        };
        let ModelSpec::Linear { features, classes } = lp.model else {
            unreachable!("checked by unsupported()")
        };
        let (features, classes) = (features as u32, classes as u32);
        let (spec, source) = match lp.data {
            DataPlan::Tensor { samples } => (
                SourceSpec::Tensor {
                    samples,
                    features: features as usize,
                    classes: classes as usize,
                    seed: data_seed,
                },
                format!(
                    "generated in memory: {samples}×{features} float32 from N(0, 1), labels in 0..{classes} (seed {data_seed}), the same bytes as on libtorch"
                ),
            ),
            DataPlan::Synthetic {
                samples,
                latency_us,
                cpu_work_rounds,
            } => (
                SourceSpec::Synthetic {
                    samples,
                    features: features as usize,
                    classes: classes as usize,
                    latency_us,
                    cpu_work_rounds,
                },
                format!(
                    "synthetic: {samples} samples, {} ms sleep and {cpu_work_rounds} rounds of CPU work per sample",
                    latency_us as f64 / 1000.0
                ),
            ),
            DataPlan::Images { .. } | DataPlan::Python { .. } | DataPlan::FashionMnist { .. } => {
                unreachable!("checked by unsupported()")
            }
        };
        let max_batch = lp.batch_size as u32;
        let trainer = LinearTrainer::new(ctx, features, classes, max_batch, LR)?;
        let weights = initial_weights(features, classes, weight_seed);
        // Pinning means nothing here: one point per remaining knob.
        let first_pinned = lp.pinned[0];
        let mut pts: Vec<Point> = points(&lp)
            .into_iter()
            .filter(|p| (p.pinned == first_pinned || p.engine == EngineName::Spdl) && !p.to_device)
            .map(|p| Point { pinned: false, ..p })
            .collect();
        if stall {
            pts.truncate(1);
        }
        let mut w = WgpuLoader {
            ctx,
            trainer,
            features,
            weights,
            plan: lp,
            spec,
            epochs: plan.epochs,
            shuffle_seed,
            points: pts,
            stall,
            experiment: Experiment::new(plan.id.clone(), plan.spec.kind(), String::new()),
        };
        w.experiment = w.build_skeleton(plan, &source);
        Ok(w)
    }

    fn build_skeleton(&self, plan: &ExperimentPlan, source: &str) -> Experiment {
        let lp = &self.plan;
        let bytes = (lp.batch_size as u64) * (u64::from(self.features) * 4 + 4);
        let mut e = Experiment::new(
            plan.id.clone(),
            plan.spec.kind(),
            plan.title.clone().unwrap_or_else(|| plan.id.clone()),
        );
        e.description = Some(format!(
            "The seeds/000 linear classifier (SGD {LR}) trained as WGSL compute passes on {} ({:?}), fed by the native loader over {source}; each step writes the loader's batch to the device (Queue::write_buffer) and submits the step, in both timing modes.{}",
            self.ctx.info.name,
            self.ctx.info.backend,
            if self.stall {
                " Three ways: one batch resident on the device before the clock, the steps training on it (compute_only); the loader's epoch-0 batches collated in host memory before the clock and written each step (from_host); the loader itself (full_pipeline). Transfer stall = 1 − from_host/compute_only; data stall = 1 − full_pipeline/from_host."
            } else {
                ""
            }
        ));
        for (k, v) in [
            ("model", ParamValue::from("linear")),
            ("parameters", ParamValue::from(lp.model.parameters() as i64)),
            ("backend", ParamValue::from("wgpu")),
            ("data_source", ParamValue::from(source)),
            ("batch_size", ParamValue::from(lp.batch_size)),
            ("shuffle", ParamValue::from(lp.shuffle)),
            ("drop_last", ParamValue::from(lp.drop_last)),
            ("optimizer", ParamValue::from("sgd")),
            ("lr", ParamValue::from(f64::from(LR))),
            ("pinned", ParamValue::from(NO_PINNING)),
        ] {
            e.settings.insert(k.into(), v);
        }
        if self.stall {
            e.swept = vec!["source".into()];
            e.baseline = Some("compute_only".into());
            e.configurations = ["compute_only", "from_host", "full_pipeline"]
                .iter()
                .map(|id| {
                    Configuration::new(*id, *id)
                        .with_param("source", *id)
                        .with_batch_bytes(bytes)
                })
                .collect();
            return e;
        }
        let mut swept = swept_knobs(lp);
        swept.retain(|k| k != "prefetch_to_device");
        e.configurations = self
            .points
            .iter()
            .map(|&p| {
                let peer = (p.engine != EngineName::Native).then_some(NO_PEERS);
                let mut c = stallscope_core::grid::configuration(lp, p, None, peer, false)
                    .with_batch_bytes(bytes);
                c.params.remove("pinned");
                c.params.remove("prefetch_to_device");
                c.not_applicable.remove("pinned");
                if lp.pinned.len() > 1 {
                    c = c.with_not_applicable("pinned", NO_PINNING);
                }
                c
            })
            .collect();
        if lp.prefetch_to_device.contains(&true) {
            e.settings.insert(
                "prefetch_to_device".into(),
                ParamValue::from("not built for wgpu yet (double-buffered uploads); only the configurations without it ran"),
            );
        }
        e.baseline = e.configurations.first().map(|c| c.id.clone());
        e.swept = swept;
        e
    }

    fn loader(&self, p: Point) -> Result<Loader, LoaderError> {
        Loader::new(
            loader_config(&self.plan, p, self.shuffle_seed),
            self.spec.clone(),
        )
    }

    /// `way` is the stall way (`compute_only`, `from_host`) or
    /// `full_pipeline` for the loader itself.
    fn unit(
        &self,
        way: &str,
        point: Point,
        cid: &str,
        repeat: u32,
        cx: &UnitCtx,
    ) -> Result<Vec<Run>, UnitError> {
        // from_host and compute_only: the loader's epoch 0, collated before
        // the clock; only the full pipeline runs a loader while timed.
        let host: Vec<HostBatch> = if way == "full_pipeline" {
            Vec::new()
        } else {
            let mut l = self.loader(point).map_err(loader_error)?;
            let batches: Result<Vec<Batch>, _> = l.start_epoch(0).map_err(loader_error)?.collect();
            batches
                .map_err(loader_error)?
                .into_iter()
                .map(|b| HostBatch {
                    y: labels(&b),
                    x: b.inputs,
                })
                .collect()
        };
        let rows: Vec<usize> = host.iter().map(|b| b.y.len()).collect();
        let mut runs = Vec::new();
        for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
            let mut loader = match way {
                "full_pipeline" => Some(self.loader(point).map_err(loader_error)?),
                _ => None,
            };
            self.warm_up(host.first()).map_err(wgpu_error)?;
            for epoch in 0..self.epochs {
                cx.progress
                    .epoch(&self.experiment.id, cid, repeat, mode.clone(), epoch);
                let batches = match (way, loader.as_mut()) {
                    (_, Some(l)) => Batches::Loader(l),
                    ("compute_only", None) => Batches::Resident(&rows),
                    _ => Batches::Host(&host),
                };
                let slot = EpochSlot {
                    mode: mode.clone(),
                    repeat,
                    epoch,
                };
                runs.push(self.epoch(batches, &slot, cx)?);
                cx.progress.epoch_done();
            }
        }
        Ok(runs)
    }

    /// The initial weights, one step of the same shape outside the timed
    /// region, the initial weights again; compute_only's resident batch
    /// stays written.
    fn warm_up(&self, resident: Option<&HostBatch>) -> Result<(), WgpuError> {
        let t = &self.trainer;
        t.set_weights(&self.weights);
        let rows = self.plan.batch_size;
        let zeros;
        let b = match resident {
            Some(b) => b,
            None => {
                zeros = HostBatch {
                    x: vec![0.0; rows * self.features as usize],
                    y: vec![0; rows],
                };
                &zeros
            }
        };
        t.write_batch(&b.x, &b.y);
        t.submit_step(b.y.len() as u32);
        t.set_weights(&self.weights);
        self.ctx.wait()
    }

    fn epoch(&self, batches: Batches, slot: &EpochSlot, cx: &UnitCtx) -> Result<Run, UnitError> {
        let mut steps = WgpuSteps {
            trainer: &self.trainer,
            batches,
        };
        Ok(run_epoch(&mut steps, slot, cx.stop)?)
    }
}

fn labels(b: &Batch) -> Vec<u32> {
    b.labels.iter().map(|&l| l as u32).collect()
}

fn loader_error(e: LoaderError) -> UnitError {
    loader_failure(e).into()
}

fn wgpu_error(e: WgpuError) -> UnitError {
    UnitError::Failed(e.to_string())
}

impl Driven for WgpuLoader<'_> {
    fn skeleton(&self) -> Experiment {
        self.experiment.clone()
    }

    fn epochs_per_unit(&self) -> u64 {
        2 * u64::from(self.epochs)
    }

    fn run_unit(&mut self, index: usize, repeat: u32, cx: &UnitCtx) -> Result<Vec<Run>, UnitError> {
        let cid = self.experiment.configurations[index].id.clone();
        if self.stall {
            self.unit(&cid, self.points[0], &cid, repeat, cx)
        } else {
            self.unit("full_pipeline", self.points[index], &cid, repeat, cx)
        }
    }
}
