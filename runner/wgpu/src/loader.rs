//! The `loader` and `stall` experiments on wgpu: the native loader (in the
//! loop, threads or processes; the same sampler and the same bytes as on
//! libtorch) feeds the seeds/000 linear classifier's WGSL step. Each step
//! writes the loader's batch to the device and submits the step, in both
//! timing modes; the driver runs the units.

use std::sync::atomic::Ordering;
use std::time::Instant;

use stallscope_bundle::{
    Configuration, Experiment, Memory, ParamValue, Phase, Run, StepSeries, TimingMode, WholeRun,
    analysis::diagnostic_from_series,
};
use stallscope_loader::{Batch, Loader, LoaderError, SourceSpec};

use super::{LinearTrainer, WgpuCtx, WgpuError, host_peak_rss_bytes};
use crate::driver::{Driven, UnitCtx, UnitError};
use crate::loader::experiment::{Point, loader_config, points, swept_knobs};
use crate::models::ModelSpec;
use crate::suite::EngineName;
use crate::suite::{DataPlan, ExperimentPlan, ExperimentSpec, LoaderPlan};

/// Learning rate of the seeds/000 classifier (SGD 0.01).
const LR: f32 = 0.01;
const NO_PINNING: &str =
    "wgpu stages every host-to-device copy itself: there is no pinned host memory to ask for";

/// Where a loop takes its batches from.
enum Batches<'b> {
    /// The real loader.
    Loader(&'b mut Loader),
    /// Pre-collated batches in host memory (labels already as the shader's
    /// u32), written each step.
    Host(&'b [HostBatch]),
    /// One batch written to the device before the clock; the steps train
    /// on it with these row counts (no copy inside the epoch).
    Resident(&'b [usize]),
}

/// A batch collated before the clock, in the form the step writes.
struct HostBatch {
    x: Vec<f32>,
    y: Vec<u32>,
}

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
            if classes <= i64::from(super::linear::MAX_CLASSES) =>
        {
            None
        }
        _ => Some("the wgpu engine trains the seeds/000 linear classifier on tensor or synthetic sources; image sources need the image CNN on libtorch (run it with --device cpu or cuda)".into()),
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
        let weights = super::linear::initial_weights(features, classes, weight_seed);
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
                let mut c =
                    crate::loader::points::configuration(lp, p, None, peer).with_batch_bytes(bytes);
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
                let mut run = self.epoch(batches, mode.clone(), repeat, epoch, cx)?;
                run.loader = loader.as_ref().and_then(Loader::last_stats);
                runs.push(run);
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

    fn epoch(
        &self,
        batches: Batches,
        mode: TimingMode,
        repeat: u32,
        epoch: u32,
        cx: &UnitCtx,
    ) -> Result<Run, UnitError> {
        let t = &self.trainer;
        let diagnostic = mode == TimingMode::Diagnostic;
        let (mut samples, mut bytes) = (0u64, 0u64);
        let mut series = StepSeries::default();
        let mut steps = 0u64;
        let workers = match &batches {
            Batches::Loader(l) => Some(l.worker_registry()),
            _ => None,
        };
        let watch = crate::cost::EpochWatch::start_with(workers, no_gpu_series(), !diagnostic);
        let taken = watch.steps();
        self.ctx.wait().map_err(wgpu_error)?;
        let started = Instant::now();
        let mut iterator_creation_s = None;
        let mut step = |xs: Option<(&[f32], &[u32])>, n: usize, t0: Instant| {
            // A slowed rank's delay counts as its wait for the batch.
            crate::ranks::slow_batch();
            let t1 = Instant::now();
            if let Some((x, y)) = xs {
                t.write_batch(x, y);
            }
            if diagnostic {
                t.flush_copies();
                self.ctx.wait().map_err(wgpu_error)?;
            }
            let t2 = Instant::now();
            t.submit_step(n as u32);
            // With ranks, every step meets the others (timed as comm when
            // diagnostic); a no-op for one process.
            if diagnostic {
                self.ctx.wait().map_err(wgpu_error)?;
                let t3 = Instant::now();
                series.next_wait_ns.push((t1 - t0).as_nanos() as u64);
                series.transfer_ns.push((t2 - t1).as_nanos() as u64);
                series.compute_ns.push((t3 - t2).as_nanos() as u64);
                if let Some(ns) = crate::ranks::timed_step_barrier(steps, epoch)? {
                    series.comm_ns.push(ns);
                }
            } else {
                crate::ranks::step_barrier(steps, epoch)?;
            }
            samples += n as u64;
            bytes += xs.map_or(0, |(x, y)| (x.len() * 4 + y.len() * 4) as u64);
            steps += 1;
            taken.fetch_add(1, Ordering::Relaxed);
            Ok::<(), UnitError>(())
        };
        match batches {
            Batches::Loader(loader) => {
                let mut it = loader.start_epoch(epoch).map_err(loader_error)?;
                iterator_creation_s = Some(started.elapsed().as_secs_f64());
                loop {
                    let t0 = Instant::now();
                    let Some(b) = it.next_batch() else { break };
                    let b = b.map_err(loader_error)?;
                    let y = labels(&b);
                    step(Some((&b.inputs, &y)), y.len(), t0)?;
                    if cx.stop.load(Ordering::Relaxed) {
                        return Err(UnitError::Interrupted);
                    }
                }
            }
            Batches::Host(host) => {
                for b in host {
                    let t0 = Instant::now();
                    step(Some((&b.x, &b.y)), b.y.len(), t0)?;
                    if cx.stop.load(Ordering::Relaxed) {
                        return Err(UnitError::Interrupted);
                    }
                }
            }
            Batches::Resident(rows) => {
                // The warm-up left the first batch resident: no batch is
                // copied, only the step's 16 bytes of parameters when its
                // row count changes (the epoch's first and its partial last).
                let mut resident = None;
                for &n in rows {
                    if resident != Some(n) {
                        t.set_rows(n as u32);
                        resident = Some(n);
                    }
                    step(None, n, Instant::now())?;
                    if cx.stop.load(Ordering::Relaxed) {
                        return Err(UnitError::Interrupted);
                    }
                }
            }
        }
        self.ctx.wait().map_err(wgpu_error)?;
        let seconds = started.elapsed().as_secs_f64();
        let mut run = Run::new(
            format!("{}-r{repeat}-e{epoch}", mode.as_str()),
            mode.clone(),
            repeat,
            epoch,
            if epoch == 0 {
                Phase::Cold
            } else {
                Phase::Steady
            },
        );
        if diagnostic {
            run.diagnostic = Some(diagnostic_from_series(
                &series,
                seconds,
                samples,
                bytes,
                iterator_creation_s,
            ));
            run.steps = Some(series);
        } else {
            run.whole_run = Some(WholeRun::measured(seconds, samples, steps, bytes));
        }
        run.memory = Some(Memory {
            host_peak_rss_bytes: host_peak_rss_bytes(),
            ..Memory::default()
        });
        watch.finish(&mut run);
        Ok(run)
    }
}

/// Why a wgpu epoch's timeline has no GPU series.
pub(crate) fn no_gpu_series() -> crate::cost::GpuTarget {
    crate::cost::GpuTarget::None(
        "the wgpu engine does not map its adapter to an NVML device".into(),
    )
}

fn labels(b: &Batch) -> Vec<u32> {
    b.labels.iter().map(|&l| l as u32).collect()
}

fn loader_error(e: LoaderError) -> UnitError {
    match e {
        LoaderError::Worker { .. } | LoaderError::Spawn { .. } => {
            UnitError::Recorded(Box::new(e.to_failure()))
        }
        other => UnitError::Failed(other.to_string()),
    }
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
