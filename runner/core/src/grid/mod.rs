//! The grid of a loader sweep: one [`Point`] per configuration, across the
//! engines (native, pytorch, spdl, dali, nodes), with its id and label
//! (`naming.rs`) and the bundle configuration written the same way for
//! every engine (`configuration.rs`).
//!
//! A public namespace of the core (`stallscope_core::grid`): its parts are
//! private and what other crates use is re-exported here.

mod configuration;
mod naming;

pub use configuration::{MIXED_NEEDS_CUDA, configuration};
pub use naming::{label, point_id};

use stallscope_loader::{LoaderConfig, Sampler, WorkerKind};

use crate::suite::{DaliDevice, EngineName, LoaderPlan, MpContext};

/// One loader configuration of a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub engine: EngineName,
    /// Native: threads or processes; pytorch: DataLoader worker processes;
    /// spdl: the concurrency of its per-sample stage (on its thread pool,
    /// or a process pool with `kind` processes); dali: its `num_threads`;
    /// nodes: the ParallelMapper's workers (threads or processes).
    pub workers: usize,
    pub kind: WorkerKind,
    pub prefetch: usize,
    pub persistent: bool,
    pub pinned: bool,
    /// The DataLoader's start method (pytorch, and nodes' processes).
    pub context: MpContext,
    pub to_device: bool,
    /// The DataLoader fetches each batch through `__getitems__` (pytorch).
    pub batched: bool,
    /// Where DALI decodes (dali).
    pub dali_device: DaliDevice,
}

impl Point {
    /// The point of `engine` at `workers`, with every other knob at its
    /// plain value.
    pub fn base(engine: EngineName, workers: usize, pinned: bool, to_device: bool) -> Point {
        Point {
            engine,
            workers,
            kind: WorkerKind::Threads,
            prefetch: 0,
            persistent: false,
            pinned,
            context: MpContext::Fork,
            to_device,
            batched: false,
            dali_device: DaliDevice::Cpu,
        }
    }
}

/// Every point of a loader sweep, in the suite's order: engine, workers,
/// pinned, device prefetch, then each engine's own knobs. At workers 0
/// only `pinned` (and pytorch's batched fetch) varies; SPDL and DALI need
/// at least one worker.
pub fn points(lp: &LoaderPlan) -> Vec<Point> {
    let mut out = Vec::new();
    for &engine in &lp.engines {
        for &workers in &lp.workers {
            if matches!(engine, EngineName::Spdl | EngineName::Dali) && workers == 0 {
                continue;
            }
            let pinned: &[bool] = if engine == EngineName::Spdl {
                &lp.pinned[..1]
            } else {
                &lp.pinned
            };
            for &pinned in pinned {
                for &to_device in &lp.prefetch_to_device {
                    let base = Point::base(engine, workers, pinned, to_device);
                    out.extend(engine_points(lp, base));
                }
            }
        }
    }
    out
}

/// The points of one engine at `base`'s workers, pinning and device
/// prefetch: its own knobs crossed.
fn engine_points(lp: &LoaderPlan, base: Point) -> Vec<Point> {
    let mut out = Vec::new();
    let workers = base.workers > 0;
    match base.engine {
        EngineName::Pytorch => {
            for &batched in &lp.batched_fetch {
                let base = Point { batched, ..base };
                if !workers {
                    out.push(base);
                    continue;
                }
                for &context in &lp.contexts {
                    for &prefetch in &lp.prefetch {
                        for &persistent in &lp.persistent {
                            out.push(Point {
                                kind: WorkerKind::Processes,
                                context,
                                prefetch,
                                persistent,
                                ..base
                            });
                        }
                    }
                }
            }
        }
        _ if !workers => out.push(base),
        EngineName::Native => {
            for &kind in &lp.kinds {
                for &prefetch in &lp.prefetch {
                    for &persistent in &lp.persistent {
                        out.push(Point {
                            kind,
                            prefetch,
                            persistent,
                            ..base
                        });
                    }
                }
            }
        }
        EngineName::Spdl | EngineName::Nodes => {
            for &kind in &lp.kinds {
                for &prefetch in &lp.prefetch {
                    out.push(Point {
                        kind,
                        prefetch,
                        ..base
                    });
                }
            }
        }
        EngineName::Dali => {
            for &dali_device in &lp.dali_devices {
                for &prefetch in &lp.prefetch {
                    out.push(Point {
                        dali_device,
                        prefetch,
                        ..base
                    });
                }
            }
        }
    }
    out
}

/// Whether a plan's engine is a swept dimension (any peer named).
pub fn engine_swept(lp: &LoaderPlan) -> bool {
    lp.engines != [EngineName::Native]
}

/// The swept knobs of a plan: `workers` (the charts' x axis), `engine`
/// when a peer is named (one series per engine), then each knob with more
/// than one value.
pub fn swept_knobs(lp: &LoaderPlan) -> Vec<String> {
    let mut swept = vec!["workers".to_string()];
    if engine_swept(lp) {
        swept.push("engine".into());
    }
    for (name, n) in [
        ("worker_kind", lp.kinds.len()),
        ("context", lp.contexts.len()),
        ("prefetch", lp.prefetch.len()),
        ("persistent", lp.persistent.len()),
        ("pinned", lp.pinned.len()),
        ("prefetch_to_device", lp.prefetch_to_device.len()),
        ("batched_fetch", lp.batched_fetch.len()),
        ("dali_device", lp.dali_devices.len()),
    ] {
        if n > 1 {
            swept.push(name.into());
        }
    }
    // DALI's mixed decoder is recorded as not applicable without a GPU,
    // which only a swept knob may be.
    let mixed = lp.dali_devices.contains(&DaliDevice::Mixed);
    if mixed && lp.dali_devices.len() == 1 && lp.engines.contains(&EngineName::Dali) {
        swept.push("dali_device".into());
    }
    swept
}

/// The loader's knobs at one point of a plan, for every engine: the
/// sampler (shuffled from `shuffle_seed` when asked), batch, workers.
pub fn loader_config(lp: &LoaderPlan, p: Point, shuffle_seed: u64) -> LoaderConfig {
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
