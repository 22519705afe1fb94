//! The `loader` experiment (a sweep of loader knobs, each configuration
//! trained in both timing modes, cold and steady epochs) and the `stall`
//! experiment (the differential method: compute-only, from host memory, the
//! full pipeline).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use stallscope_bundle::{Configuration, Engine, Experiment, ExperimentKind, ParamValue, Run};

use super::generate::{ImageSetSpec, default_cache_root, ensure_image_set};
use super::native_feed::{NativeFeed, Pinning};
use super::{
    Fault, ImageSpec, LoaderConfig, LoaderError, OnBadSample, Sampler, SourceSpec, WorkerKind,
    full_batch_bytes,
};
use crate::experiments::{GridExperiment, RunCtx, UnitError, train_unit};
use crate::feed::Feed;
use crate::models::ModelSpec;
use crate::suite::{DataPlan, LoaderPlan};
use crate::suite::{ExperimentPlan, ExperimentSpec};
use crate::train::CopyMode;

/// Test and demonstration hook: `STALLSCOPE_LOADER_FAULT=panic@N` or
/// `abort@N` makes the worker loading sample N panic or (a process) abort;
/// `…@N@CONFIG` limits it to the configuration with that id.
pub const FAULT_ENV: &str = "STALLSCOPE_LOADER_FAULT";

fn fault_from_env(config_id: &str) -> Option<Fault> {
    let v = std::env::var(FAULT_ENV).ok()?;
    let mut parts = v.split('@');
    let (what, sample) = (parts.next()?, parts.next()?.parse().ok()?);
    if let Some(only) = parts.next()
        && only != config_id
    {
        return None;
    }
    match what {
        "panic" => Some(Fault::PanicAt { sample }),
        "abort" => Some(Fault::AbortAt { sample }),
        _ => None,
    }
}

/// One loader configuration of a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Point {
    pub(crate) workers: usize,
    pub(crate) kind: WorkerKind,
    pub(crate) prefetch: usize,
    pub(crate) persistent: bool,
    pub(crate) pinned: bool,
}

/// What both experiments share: the data, the model, the loader basics.
pub(super) struct Common {
    pub(super) id: String,
    pub(super) title: Option<String>,
    pub(super) epochs: u32,
    pub(super) plan: LoaderPlan,
    pub(super) spec: SourceSpec,
    pub(super) data_source: String,
    pub(super) samples: usize,
    pub(super) sample_dims: Vec<usize>,
    pub(super) shuffle_seed: u64,
    pub(super) cuda: bool,
    pub(super) device: tch::Device,
    pub(super) pin_note: Option<String>,
}

impl Common {
    pub(super) fn new(
        plan: &ExperimentPlan,
        lp: &LoaderPlan,
        rc: &RunCtx,
    ) -> Result<Common, UnitError> {
        let fail = |e: &dyn std::fmt::Display| UnitError::Failed(e.to_string());
        let seed = rc.seeds.data;
        let (spec, data_source) = match (&lp.data, lp.model) {
            (DataPlan::Tensor { samples }, ModelSpec::Linear { features, classes }) => (
                SourceSpec::Tensor {
                    samples: *samples,
                    features: features as usize,
                    classes: classes as usize,
                    seed,
                },
                format!(
                    "generated in memory: {samples}×{features} float32 from N(0, 1), labels in 0..{classes} (seed {seed})"
                ),
            ),
            (
                DataPlan::Synthetic {
                    samples,
                    latency_us,
                    cpu_work_rounds,
                },
                ModelSpec::Linear { features, classes },
            ) => (
                SourceSpec::Synthetic {
                    samples: *samples,
                    features: features as usize,
                    classes: classes as usize,
                    latency_us: *latency_us,
                    cpu_work_rounds: *cpu_work_rounds,
                },
                format!(
                    "synthetic: {samples} samples, {} ms sleep and {cpu_work_rounds} rounds of CPU work per sample",
                    *latency_us as f64 / 1000.0
                ),
            ),
            (
                DataPlan::Images {
                    dir,
                    samples,
                    width,
                    height,
                    resize,
                    flip,
                    random_crop,
                },
                ModelSpec::ImageCnn { size, classes },
            ) => {
                let (dir, what) = match dir {
                    Some(d) => (d.clone(), format!("image directory {}", d.display())),
                    None => {
                        let set = ImageSetSpec {
                            count: *samples,
                            width: *width,
                            height: *height,
                            classes: (classes as usize).min(*samples).clamp(1, 100),
                            seed,
                            quality: 90,
                        };
                        let d =
                            ensure_image_set(&default_cache_root(), &set).map_err(|e| fail(&e))?;
                        (
                            d.clone(),
                            format!(
                                "generated JPEG set: {samples} images of {width}×{height}, quality 90 (seed {seed}), cached in {}",
                                d.display()
                            ),
                        )
                    }
                };
                let spec = SourceSpec::Images(ImageSpec {
                    dir,
                    resize: *resize,
                    crop: size as u32,
                    random_crop: *random_crop,
                    flip: *flip,
                });
                (
                    spec,
                    format!(
                        "{what}; decode, resize shorter side to {resize}, {} crop {size}, {}normalise (ImageNet mean/std), NCHW float32",
                        if *random_crop { "random" } else { "centre" },
                        if *flip {
                            "random horizontal flip, "
                        } else {
                            ""
                        }
                    ),
                )
            }
            (d, m) => {
                return Err(UnitError::Failed(format!(
                    "source {} does not fit model {}",
                    d.name(),
                    m.name()
                )));
            }
        };
        let probe = super::open_source(&spec).map_err(|e| fail(&e))?;
        let cuda = rc.device.is_cuda();
        let pin_note = match (
            lp.pinned.contains(&true),
            Pinning::for_device(true, rc.device.device),
        ) {
            (true, Pinning::Skipped(reason)) => Some(reason),
            _ => None,
        };
        Ok(Common {
            id: plan.id.clone(),
            title: plan.title.clone(),
            epochs: plan.epochs,
            plan: lp.clone(),
            samples: probe.len(),
            sample_dims: probe.sample_dims(),
            spec,
            data_source,
            shuffle_seed: rc.seeds.shuffle,
            cuda,
            device: rc.device.device,
            pin_note,
        })
    }

    pub(super) fn loader_config(&self, p: Point, config_id: &str) -> LoaderConfig {
        LoaderConfig {
            fault: fault_from_env(config_id),
            ..loader_config(&self.plan, p, self.shuffle_seed)
        }
    }

    pub(super) fn batch_bytes(&self) -> u64 {
        full_batch_bytes(&self.sample_dims, self.plan.batch_size)
    }

    pub(super) fn settings(&self) -> BTreeMap<String, ParamValue> {
        let mut s = BTreeMap::new();
        let mut put = |k: &str, v: ParamValue| {
            s.insert(k.to_string(), v);
        };
        put("model", self.plan.model.name().into());
        put("data", self.plan.data.name().into());
        put("data_source", self.data_source.clone().into());
        put("samples", self.samples.into());
        put("batch_size", self.plan.batch_size.into());
        put("shuffle", self.plan.shuffle.into());
        put("shuffle_seed", (self.shuffle_seed as i64).into());
        put(
            "augment_seed",
            format!("per worker and epoch, derived from {}", self.shuffle_seed).into(),
        );
        put("drop_last", self.plan.drop_last.into());
        put("in_order", self.plan.in_order.into());
        put(
            "on_bad_sample",
            match self.plan.on_bad_sample {
                OnBadSample::Skip => "skip",
                OnBadSample::Fail => "fail",
            }
            .into(),
        );
        put(
            "optimizer",
            self.plan.model.default_optimizer().name().into(),
        );
        put("lr", self.plan.model.default_optimizer().lr().into());
        put("prefetch_estimate", "batch_bytes × workers × prefetch: an estimate of batch contents only (not the dataset, work in flight, shared memory or pinned staging); compare with the measured host peak RSS".into());
        put(
            "host_peak_rss",
            "of the runner process; worker processes' own memory is not included".into(),
        );
        put(
            "warm_up",
            "1 synthetic step of the same batch shape, untimed".into(),
        );
        if let Some(note) = &self.pin_note {
            put("pinning_skipped", note.clone().into());
        }
        s
    }

    pub(super) fn train(
        &self,
        rc: &RunCtx,
        config_id: &str,
        repeat: u32,
        make_feed: &mut dyn FnMut() -> Result<Box<dyn Feed>, UnitError>,
        non_blocking: bool,
    ) -> Result<Vec<Run>, UnitError> {
        train_unit(
            rc,
            &self.id,
            config_id,
            repeat,
            self.epochs,
            self.plan.model,
            self.plan.batch_size as i64,
            CopyMode {
                non_blocking: non_blocking && self.cuda,
            },
            make_feed,
        )
    }
}

/// Build the feed of one point, remembering a loader error with its worker
/// and sample for the bundle (the training loop's error carries only text).
pub(super) fn native_feed(
    common: &Common,
    p: Point,
    config_id: &str,
    last_error: &Arc<Mutex<Option<LoaderError>>>,
) -> Result<Box<dyn Feed>, UnitError> {
    let pinning = Pinning::for_device(p.pinned, common.device);
    let feed = NativeFeed::new(
        common.loader_config(p, config_id),
        common.spec.clone(),
        pinning,
    )
    .map_err(|e| UnitError::Failed(e.to_string()))?
    .with_error_slot(Arc::clone(last_error));
    Ok(Box::new(feed))
}

/// Turn a failed unit into the bundle's worker failure when the loader said why.
pub(super) fn recorded(err: UnitError, last_error: &Arc<Mutex<Option<LoaderError>>>) -> UnitError {
    match (err, last_error.lock().expect("error slot").take()) {
        (UnitError::Failed(_), Some(loader)) => UnitError::Recorded(Box::new(loader.to_failure())),
        (other, _) => other,
    }
}

/// The loader's knobs at one point of a plan, for every engine: the
/// sampler (shuffled from `shuffle_seed` when asked), batch, workers.
pub(crate) fn loader_config(lp: &LoaderPlan, p: Point, shuffle_seed: u64) -> LoaderConfig {
    LoaderConfig {
        batch_size: lp.batch_size,
        drop_last: lp.drop_last,
        sampler: if lp.shuffle {
            Sampler::Shuffled { seed: shuffle_seed }
        } else {
            Sampler::Sequential
        },
        workers: p.workers,
        kind: p.kind,
        prefetch: p.prefetch.max(1),
        persistent: p.persistent,
        in_order: lp.in_order,
        on_bad_sample: lp.on_bad_sample,
        seed: shuffle_seed,
        fault: None,
        worker_program: None,
    }
}

/// The swept loader knobs of a plan: `workers`, then each knob with more
/// than one value.
pub(crate) fn swept_knobs(lp: &LoaderPlan) -> Vec<String> {
    let mut swept = vec!["workers".to_string()];
    for (name, n) in [
        ("worker_kind", lp.kinds.len()),
        ("prefetch", lp.prefetch.len()),
        ("persistent", lp.persistent.len()),
        ("pinned", lp.pinned.len()),
    ] {
        if n > 1 {
            swept.push(name.into());
        }
    }
    swept
}

/// Every point of a loader sweep, in the suite's order. At workers 0 only
/// `pinned` varies: kind, prefetch and persistence have no meaning there.
pub(crate) fn points(lp: &LoaderPlan) -> Vec<Point> {
    let mut points = Vec::new();
    for &workers in &lp.workers {
        for &pinned in &lp.pinned {
            if workers == 0 {
                points.push(Point {
                    workers,
                    kind: WorkerKind::Threads,
                    prefetch: 0,
                    persistent: false,
                    pinned,
                });
                continue;
            }
            for &kind in &lp.kinds {
                for &prefetch in &lp.prefetch {
                    for &persistent in &lp.persistent {
                        points.push(Point {
                            workers,
                            kind,
                            prefetch,
                            persistent,
                            pinned,
                        });
                    }
                }
            }
        }
    }
    points
}

/// `kind = "loader"`: the knobs swept.
pub struct LoaderExperiment {
    common: Common,
    points: Vec<Point>,
}

impl LoaderExperiment {
    pub fn new(plan: &ExperimentPlan, rc: &RunCtx) -> Result<LoaderExperiment, UnitError> {
        let ExperimentSpec::Loader(lp) = &plan.spec else {
            unreachable!("LoaderExperiment::new is called for loader plans only")
        };
        let points = points(lp);
        Ok(LoaderExperiment {
            common: Common::new(plan, lp, rc)?,
            points,
        })
    }

    pub(crate) fn point_id(p: Point) -> String {
        if p.workers == 0 {
            format!("w0-pin{}", p.pinned as u8)
        } else {
            format!(
                "w{}-{}-pf{}-pers{}-pin{}",
                p.workers,
                p.kind.as_str(),
                p.prefetch,
                p.persistent as u8,
                p.pinned as u8
            )
        }
    }

    fn label(&self, p: Point) -> String {
        let lp = &self.common.plan;
        let mut parts = vec![if p.workers == 0 {
            "in loop (0 workers)".to_string()
        } else {
            format!("{} {}", p.workers, p.kind.as_str())
        }];
        if p.workers > 0 && lp.prefetch.len() > 1 {
            parts.push(format!("prefetch {}", p.prefetch));
        }
        if p.workers > 0 && lp.persistent.len() > 1 {
            parts.push(
                if p.persistent {
                    "persistent"
                } else {
                    "restarted each epoch"
                }
                .into(),
            );
        }
        if lp.pinned.len() > 1 {
            parts.push(match (p.pinned, &self.common.pin_note) {
                (true, Some(_)) => "pinned asked (skipped: no CUDA)".into(),
                (true, None) => "pinned".into(),
                (false, _) => "pageable".into(),
            });
        }
        parts.join(", ")
    }
}

impl GridExperiment for LoaderExperiment {
    fn skeleton(&self) -> Experiment {
        let lp = &self.common.plan;
        let swept = swept_knobs(lp);
        const NO_WORKERS: &str = "no workers: the loop builds each batch itself, so there is nothing to keep ahead or alive";
        let configurations = self
            .points
            .iter()
            .map(|&p| {
                let mut c = Configuration::new(Self::point_id(p), self.label(p))
                    .with_param("workers", p.workers)
                    .with_param(
                        "worker_kind",
                        if p.workers == 0 {
                            "in_loop"
                        } else {
                            p.kind.as_str()
                        },
                    )
                    .with_param("pinned", p.pinned)
                    .with_batch_bytes(self.common.batch_bytes())
                    .with_engine(Engine::Native);
                if p.workers > 0 {
                    c = c
                        .with_param("prefetch", p.prefetch)
                        .with_param("persistent", p.persistent);
                } else {
                    // Recorded as not applicable (shown as "—" with the
                    // reason), never left out: a swept knob has a value or
                    // a reason in every configuration.
                    for (knob, values) in [
                        ("prefetch", lp.prefetch.len()),
                        ("persistent", lp.persistent.len()),
                    ] {
                        if values > 1 {
                            c = c.with_not_applicable(knob, NO_WORKERS);
                        }
                    }
                }
                c
            })
            .collect::<Vec<_>>();
        Experiment {
            description: Some(format!(
                "Each configuration trains the {} for whole epochs over {} samples ({}) through the native loader, in both timing modes; epoch 0 of each repeat is cold (worker start-up included), later epochs steady. Thread workers share the runner's process; process workers run the small stallscope-loader-worker binary (no libtorch) and hand batches over through POSIX shared memory. Workers take batches round-robin, each holding at most `prefetch` batches ahead; delivery is {}.",
                self.common.plan.model.name(),
                self.common.samples,
                self.common.data_source,
                if self.common.plan.in_order {
                    "in sampler order (a reorder buffer)"
                } else {
                    "in finishing order"
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

    fn run_unit(&mut self, index: usize, repeat: u32, rc: &RunCtx) -> Result<Vec<Run>, UnitError> {
        let p = self.points[index];
        let last_error = Arc::new(Mutex::new(None));
        let common = &self.common;
        let id = Self::point_id(p);
        let mut make_feed = || native_feed(common, p, &id, &last_error);
        common
            .train(rc, &id, repeat, &mut make_feed, p.pinned)
            .map_err(|e| recorded(e, &last_error))
    }
}

pub use super::stall::StallExperiment;
