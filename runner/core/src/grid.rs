//! The grid of a loader sweep: one [`Point`] per configuration, across the
//! engines (native, pytorch, spdl), with its id, label and the bundle
//! configuration every engine back end writes the same way.

use stallscope_bundle::{Configuration, ParamValue};

use stallscope_loader::{LoaderConfig, Sampler, WorkerKind};

use crate::suite::{EngineName, LoaderPlan, MpContext};

/// One loader configuration of a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub engine: EngineName,
    /// Native: threads or processes; pytorch: DataLoader worker processes;
    /// spdl: the concurrency of its per-sample stage (on its thread pool,
    /// or a process pool with `kind` processes).
    pub workers: usize,
    pub kind: WorkerKind,
    pub prefetch: usize,
    pub persistent: bool,
    pub pinned: bool,
    /// The DataLoader's start method (pytorch with workers only).
    pub context: MpContext,
    pub to_device: bool,
}

const NO_WORKERS: &str =
    "no workers: the loop builds each batch itself, so there is nothing to keep ahead or alive";
const SPDL_NO_PERSIST: &str =
    "SPDL builds its pipeline (and its pool) for each epoch; there are no workers to keep";
const SPDL_NO_PIN: &str =
    "the harness's SPDL pipeline hands over pageable tensors (no pinning stage)";
const NATIVE_NO_CONTEXT: &str =
    "the native loader's workers are threads or its own worker program, not Python processes";
const SPDL_NO_CONTEXT: &str =
    "SPDL runs its stages on its own pool (threads, or a process pool of its choosing)";

/// Every point of a loader sweep, in the suite's order: engine, workers,
/// pinned, device prefetch, then each engine's own knobs. At workers 0
/// only `pinned` varies; SPDL needs a concurrency of at least 1.
pub fn points(lp: &LoaderPlan) -> Vec<Point> {
    let mut out = Vec::new();
    for &engine in &lp.engines {
        for &workers in &lp.workers {
            if engine == EngineName::Spdl && workers == 0 {
                continue;
            }
            let pinned: &[bool] = if engine == EngineName::Spdl {
                &lp.pinned[..1]
            } else {
                &lp.pinned
            };
            for &pinned in pinned {
                for &to_device in &lp.prefetch_to_device {
                    let base = Point {
                        engine,
                        workers,
                        kind: WorkerKind::Threads,
                        prefetch: 0,
                        persistent: false,
                        pinned,
                        context: MpContext::Fork,
                        to_device,
                    };
                    if workers == 0 {
                        out.push(base);
                        continue;
                    }
                    match engine {
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
                        EngineName::Pytorch => {
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
                        EngineName::Spdl => {
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
                    }
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
    ] {
        if n > 1 {
            swept.push(name.into());
        }
    }
    swept
}

/// The configuration id of a point (native ids are those of format 1.0).
pub fn point_id(p: Point) -> String {
    let ptd = if p.to_device { "-ptd1" } else { "" };
    match (p.engine, p.workers) {
        (EngineName::Native, 0) => format!("w0-pin{}{ptd}", p.pinned as u8),
        (EngineName::Native, w) => format!(
            "w{w}-{}-pf{}-pers{}-pin{}{ptd}",
            p.kind.as_str(),
            p.prefetch,
            p.persistent as u8,
            p.pinned as u8
        ),
        (EngineName::Pytorch, 0) => format!("pytorch-w0-pin{}{ptd}", p.pinned as u8),
        (EngineName::Pytorch, w) => format!(
            "pytorch-w{w}-{}-pf{}-pers{}-pin{}{ptd}",
            p.context.as_str(),
            p.prefetch,
            p.persistent as u8,
            p.pinned as u8
        ),
        (EngineName::Spdl, c) => match p.kind {
            WorkerKind::Threads => format!("spdl-c{c}-pf{}{ptd}", p.prefetch),
            WorkerKind::Processes => format!("spdl-c{c}-processes-pf{}{ptd}", p.prefetch),
        },
    }
}

/// A label that names what differs between the configurations.
pub fn label(p: Point, lp: &LoaderPlan, pin_note: Option<&str>) -> String {
    let mut parts = Vec::new();
    if engine_swept(lp) {
        parts.push(p.engine.as_str().to_string());
    }
    parts.push(match (p.engine, p.workers) {
        (_, 0) => "in loop (0 workers)".to_string(),
        (EngineName::Spdl, c) if lp.kinds.len() > 1 => {
            format!("concurrency {c} ({})", p.kind.as_str())
        }
        (EngineName::Spdl, c) => format!("concurrency {c}"),
        (EngineName::Pytorch, w) if lp.contexts.len() > 1 => {
            format!("{w} workers ({})", p.context.as_str())
        }
        (EngineName::Pytorch, w) => format!("{w} workers"),
        (EngineName::Native, w) => format!("{w} {}", p.kind.as_str()),
    });
    if p.workers > 0 && lp.prefetch.len() > 1 {
        parts.push(format!("prefetch {}", p.prefetch));
    }
    if p.workers > 0 && p.engine != EngineName::Spdl && lp.persistent.len() > 1 {
        parts.push(
            if p.persistent {
                "persistent"
            } else {
                "restarted"
            }
            .into(),
        );
    }
    if lp.pinned.len() > 1 && p.engine != EngineName::Spdl {
        parts.push(match (p.pinned, pin_note) {
            (true, Some(_)) => "pin skipped".into(),
            (true, None) => "pinned".into(),
            (false, _) => "pageable".into(),
        });
    }
    if lp.prefetch_to_device.len() > 1 && p.to_device {
        parts.push("device prefetch".into());
    }
    parts.join(", ")
}

/// The bundle configuration of a point: every swept knob has a value or
/// the reason it does not apply; `unavailable` is why the point's engine
/// cannot run here (no Python peers).
pub fn configuration(
    lp: &LoaderPlan,
    p: Point,
    pin_note: Option<&str>,
    unavailable: Option<&str>,
) -> Configuration {
    let swept = swept_knobs(lp);
    let is = |k: &str| swept.iter().any(|s| s == k);
    let mut c = Configuration::new(point_id(p), label(p, lp, pin_note))
        .with_param("workers", p.workers)
        .with_engine(p.engine.bundle());
    let put = |c: Configuration, knob: &str, value: Result<ParamValue, &str>| match value {
        Ok(v) => c.with_param(knob, v),
        Err(why) if is(knob) => c.with_not_applicable(knob, why),
        Err(_) => c,
    };
    c = put(
        c,
        "engine",
        match unavailable {
            None => Ok(p.engine.as_str().into()),
            Some(why) => Err(why),
        },
    );
    if !is("engine") {
        c.params.remove("engine");
    }
    let kind = match p.workers {
        0 => "in_loop",
        _ => p.kind.as_str(),
    };
    c = c.with_param("worker_kind", kind);
    let workers = p.workers > 0;
    c = put(
        c,
        "prefetch",
        if workers {
            Ok(p.prefetch.into())
        } else {
            Err(NO_WORKERS)
        },
    );
    c = put(
        c,
        "persistent",
        match (workers, p.engine) {
            (false, _) => Err(NO_WORKERS),
            (true, EngineName::Spdl) => Err(SPDL_NO_PERSIST),
            (true, _) => Ok(p.persistent.into()),
        },
    );
    c = put(
        c,
        "context",
        match (workers, p.engine) {
            (_, EngineName::Native) => Err(NATIVE_NO_CONTEXT),
            (_, EngineName::Spdl) => Err(SPDL_NO_CONTEXT),
            (false, EngineName::Pytorch) => Err(NO_WORKERS),
            (true, EngineName::Pytorch) => Ok(p.context.as_str().into()),
        },
    );
    c = put(
        c,
        "pinned",
        if p.engine == EngineName::Spdl {
            Err(SPDL_NO_PIN)
        } else {
            Ok(p.pinned.into())
        },
    );
    if is("prefetch_to_device") {
        c = c.with_param("prefetch_to_device", p.to_device);
    }
    c
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
