//! The bundle configuration of a point: every swept knob has a value, or
//! the reason it does not apply to that point's engine.

use stallscope_bundle::{Configuration, ParamValue};

use super::{Point, label, point_id, swept_knobs};
use crate::suite::{DaliDevice, EngineName, LoaderPlan};

const NO_WORKERS: &str =
    "no workers: the loop builds each batch itself, so there is nothing to keep ahead or alive";
const SPDL_NO_PERSIST: &str =
    "SPDL builds its pipeline (and its pool) for each epoch; there are no workers to keep";
const DALI_NO_PERSIST: &str =
    "DALI's pipeline keeps its own threads for the whole run; there is no restart to choose";
const NODES_NO_PERSIST: &str =
    "torchdata.nodes' ParallelMapper starts its workers at every epoch's reset";
const SPDL_NO_PIN: &str =
    "the harness's SPDL pipeline hands over pageable tensors (no pinning stage)";
const MIXED_NO_PIN: &str = "DALI's mixed decoder hands over batches already on the GPU";
const NATIVE_NO_CONTEXT: &str =
    "the native loader's workers are threads or its own worker program, not Python processes";
const SPDL_NO_CONTEXT: &str =
    "SPDL runs its stages on its own pool (threads, or a process pool of its choosing)";
const DALI_NO_CONTEXT: &str = "DALI runs its operators on its own C++ threads";
const NODES_THREADS_NO_CONTEXT: &str =
    "thread workers share the loop's process; a start method is for process workers";
const ONLY_DATALOADER_BATCHES: &str =
    "only the DataLoader fetches a batch through the Dataset's __getitems__";
const ONLY_DALI_DECODES: &str = "where to decode is DALI's choice; this engine decodes on the CPU";
/// Why DALI's mixed decoder cannot run on this device.
pub const MIXED_NEEDS_CUDA: &str =
    "'mixed' decodes with nvJPEG and runs DALI's operators on the GPU: it needs a CUDA device";

/// The bundle configuration of a point. `unavailable` is why the point's
/// engine cannot run here (no Python peers, its package missing); `cuda`
/// whether the device is a GPU (DALI's mixed decoder needs one).
pub fn configuration(
    lp: &LoaderPlan,
    p: Point,
    pin_note: Option<&str>,
    unavailable: Option<&str>,
    cuda: bool,
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
        unavailable.map_or(Ok(p.engine.as_str().into()), Err),
    );
    if !is("engine") {
        c.params.remove("engine");
    }
    let kind = match p.workers {
        0 => "in_loop",
        _ => p.kind.as_str(),
    };
    c = c.with_param("worker_kind", kind);
    c = put(c, "prefetch", prefetch(p));
    c = put(c, "persistent", persistent(p));
    c = put(c, "context", context(p));
    c = put(c, "pinned", pinned(p));
    if is("prefetch_to_device") {
        c = c.with_param("prefetch_to_device", p.to_device);
    }
    c = put(
        c,
        "batched_fetch",
        match p.engine {
            EngineName::Pytorch => Ok(p.batched.into()),
            _ => Err(ONLY_DATALOADER_BATCHES),
        },
    );
    c = match dali_device(p, cuda) {
        // Recorded even when not swept: the configuration cannot run here.
        Err(MIXED_NEEDS_CUDA) => c.with_not_applicable("dali_device", MIXED_NEEDS_CUDA),
        v => put(c, "dali_device", v),
    };
    c
}

fn prefetch(p: Point) -> Result<ParamValue, &'static str> {
    match p.workers {
        0 => Err(NO_WORKERS),
        _ => Ok(p.prefetch.into()),
    }
}

fn persistent(p: Point) -> Result<ParamValue, &'static str> {
    match (p.workers > 0, p.engine) {
        (false, _) => Err(NO_WORKERS),
        (true, EngineName::Spdl) => Err(SPDL_NO_PERSIST),
        (true, EngineName::Dali) => Err(DALI_NO_PERSIST),
        (true, EngineName::Nodes) => Err(NODES_NO_PERSIST),
        (true, EngineName::Native | EngineName::Pytorch) => Ok(p.persistent.into()),
    }
}

fn context(p: Point) -> Result<ParamValue, &'static str> {
    use stallscope_loader::WorkerKind::Processes;
    match (p.workers > 0, p.engine) {
        (_, EngineName::Native) => Err(NATIVE_NO_CONTEXT),
        (_, EngineName::Spdl) => Err(SPDL_NO_CONTEXT),
        (_, EngineName::Dali) => Err(DALI_NO_CONTEXT),
        (false, EngineName::Pytorch | EngineName::Nodes) => Err(NO_WORKERS),
        (true, EngineName::Nodes) if p.kind != Processes => Err(NODES_THREADS_NO_CONTEXT),
        (true, EngineName::Pytorch | EngineName::Nodes) => Ok(p.context.as_str().into()),
    }
}

fn pinned(p: Point) -> Result<ParamValue, &'static str> {
    match (p.engine, p.dali_device) {
        (EngineName::Spdl, _) => Err(SPDL_NO_PIN),
        (EngineName::Dali, DaliDevice::Mixed) => Err(MIXED_NO_PIN),
        _ => Ok(p.pinned.into()),
    }
}

fn dali_device(p: Point, cuda: bool) -> Result<ParamValue, &'static str> {
    match (p.engine, p.dali_device) {
        (EngineName::Dali, DaliDevice::Mixed) if !cuda => Err(MIXED_NEEDS_CUDA),
        (EngineName::Dali, d) => Ok(d.as_str().into()),
        _ => Err(ONLY_DALI_DECODES),
    }
}
