//! The `loader` and `stall` kinds: the `[experiment.loader]` table checked
//! into a [`LoaderPlan`] (its data in `source.rs`).

use std::ops::Range;

use super::loader_cx::LoaderCx;
use super::located::{Located, SuiteError};
use super::plan::{
    DaliDevice, DataPlan, EngineName, ExperimentSpec, LoaderPlan, MpContext, PythonModel,
};
use super::raw::{RawCount, RawLoader};
use super::source::{data_plan, source_name};
use crate::model_spec::ModelSpec;
use stallscope_loader::{OnBadSample, WorkerKind};
use toml::Spanned;

/// The engines a suite may name.
const ENGINES: [(&str, EngineName); 5] = [
    ("native", EngineName::Native),
    ("pytorch", EngineName::Pytorch),
    ("spdl", EngineName::Spdl),
    ("dali", EngineName::Dali),
    ("nodes", EngineName::Nodes),
];

/// The table with `[experiment.loader.quick]` applied under `--quick`.
fn with_quick(raw: Option<&RawLoader>, quick: bool) -> RawLoader {
    let mut raw = raw.cloned().unwrap_or_default();
    if quick && let Some(q) = raw.quick.take() {
        if q.samples.is_some() {
            raw.samples = q.samples;
        }
        if q.workers.is_some() {
            raw.workers = q.workers;
        }
        if q.worker_kinds.is_some() {
            raw.worker_kinds = q.worker_kinds;
        }
        if q.engines.is_some() {
            raw.engines = q.engines;
        }
    }
    raw
}

/// Parse `[experiment.loader]` for a `loader` or `stall` experiment.
/// `loader_only` is `model = "none"`; `model` then only carries the shape
/// of the data. `python_model` is `model = "python"` (checked already).
pub(super) fn parse(
    x: &LoaderCx,
    raw: Option<&RawLoader>,
    model: ModelSpec,
    loader_only: bool,
    python_model: Option<PythonModel>,
) -> Result<ExperimentSpec, SuiteError> {
    let raw = with_quick(raw, x.quick);
    let data = data_plan(x, &raw, model)?;
    let engines = engines(x, &raw, python_model.is_some())?;
    let (workers, workers_auto) = workers_knob(
        x.cx,
        &raw.workers,
        &x.at("workers"),
        if x.kind == "stall" { &[2] } else { &[0, 2, 4] },
        loader_only,
    )?;
    let cx = x.cx;
    let plan = LoaderPlan {
        model,
        python_model,
        loader_only,
        contexts: contexts(x, &raw, &engines)?,
        batched_fetch: batched_fetch(x, &raw, &engines)?,
        dali_devices: dali_devices(x, &raw, &engines)?,
        engines,
        prefetch_to_device: cx.bools(
            &raw.prefetch_to_device,
            &x.at("prefetch_to_device"),
            false,
        )?,
        data,
        batch_size: cx.int(&raw.batch_size, &x.at("batch_size"), 64, 1, 1 << 20)? as usize,
        workers,
        workers_auto,
        kinds: worker_kinds(x, &raw)?,
        prefetch: cx.ints(&raw.prefetch, &x.at("prefetch"), &[2], 1, 64)?,
        persistent: cx.bools(&raw.persistent, &x.at("persistent"), false)?,
        pinned: cx.bools(&raw.pinned, &x.at("pinned"), false)?,
        shuffle: raw.shuffle.unwrap_or(false),
        drop_last: raw.drop_last.unwrap_or(x.kind == "stall"),
        in_order: raw.in_order.unwrap_or(true),
        on_bad_sample: on_bad_sample(x, &raw)?,
    };
    check_batch_fits(x, &raw, &plan)?;
    if x.kind == "stall" {
        check_stall(x, &raw, &plan)?;
        return Ok(ExperimentSpec::Stall(plan));
    }
    Ok(ExperimentSpec::Loader(plan))
}

/// `engines`: native by default; a python source (and a python model,
/// which needs one) runs on pytorch only.
fn engines(
    x: &LoaderCx,
    raw: &RawLoader,
    python_model: bool,
) -> Result<Vec<EngineName>, SuiteError> {
    let python = source_name(Some(raw)) == "python";
    let default: &[EngineName] = if python {
        &[EngineName::Pytorch]
    } else {
        &[EngineName::Native]
    };
    let engines =
        x.cx.choices(&raw.engines, &x.at("engines"), default, &ENGINES)?;
    if python && engines != [EngineName::Pytorch] {
        let why = if python_model {
            "model = \"python\" trains your own model on your own Dataset in the Python harness (the native engine cannot run a Python model)"
        } else {
            "source = \"python\" runs your own Dataset through the PyTorch DataLoader"
        };
        return Err(x.cx.err(
            LoaderCx::span_or(&raw.engines, x.source_span(raw)),
            &x.at("engines"),
            format!("{why}; expected engines = [\"pytorch\"]"),
        ));
    }
    Ok(engines)
}

/// `contexts`: the DataLoader's start methods (a pytorch knob).
fn contexts(
    x: &LoaderCx,
    raw: &RawLoader,
    engines: &[EngineName],
) -> Result<Vec<MpContext>, SuiteError> {
    let contexts = x.cx.choices(
        &raw.contexts,
        &x.at("contexts"),
        &[MpContext::Fork],
        &[
            ("fork", MpContext::Fork),
            ("spawn", MpContext::Spawn),
            ("forkserver", MpContext::Forkserver),
        ],
    )?;
    if contexts.len() > 1 && !engines.contains(&EngineName::Pytorch) {
        return Err(x.cx.err(
            LoaderCx::span_or(&raw.contexts, x.kind_span.clone()),
            &x.at("contexts"),
            "the start method of DataLoader workers is a pytorch knob; expected \"pytorch\" in engines",
        ));
    }
    Ok(contexts)
}

/// `batched_fetch`: the DataLoader fetching a batch through the Dataset's
/// `__getitems__` (the PyTorch tutorial's last step); a pytorch knob.
fn batched_fetch(
    x: &LoaderCx,
    raw: &RawLoader,
    engines: &[EngineName],
) -> Result<Vec<bool>, SuiteError> {
    let key = x.at("batched_fetch");
    let values = x.cx.bools(&raw.batched_fetch, &key, false)?;
    match &raw.batched_fetch {
        Some(v) if !engines.contains(&EngineName::Pytorch) => Err(x.cx.err(
            v.span(),
            &key,
            "the DataLoader's batched fetch (__getitems__) is a pytorch knob; expected \"pytorch\" in engines",
        )),
        _ => Ok(values),
    }
}

/// `dali_device`: where DALI decodes and runs its operators (`cpu`, or
/// `mixed`: nvJPEG and GPU operators); a dali knob, on image sources.
fn dali_devices(
    x: &LoaderCx,
    raw: &RawLoader,
    engines: &[EngineName],
) -> Result<Vec<DaliDevice>, SuiteError> {
    let table = [("cpu", DaliDevice::Cpu), ("mixed", DaliDevice::Mixed)];
    let key = x.at("dali_device");
    let devices =
        x.cx.choices(&raw.dali_device, &key, &[DaliDevice::Cpu], &table)?;
    let Some(v) = &raw.dali_device else {
        return Ok(devices);
    };
    if !engines.contains(&EngineName::Dali) {
        return Err(x.cx.err(
            v.span(),
            &key,
            "where DALI decodes is a dali knob; expected \"dali\" in engines",
        ));
    }
    let source = source_name(Some(raw));
    if devices.contains(&DaliDevice::Mixed) && source != "images" {
        return Err(x.cx.err(
            v.span(),
            &key,
            format!(
                "\"mixed\" with source = {source:?}; \"mixed\" is where DALI decodes JPEGs, expected source = \"images\""
            ),
        ));
    }
    Ok(devices)
}

/// `worker_kinds`: threads or processes.
fn worker_kinds(x: &LoaderCx, raw: &RawLoader) -> Result<Vec<WorkerKind>, SuiteError> {
    let Some(v) = &raw.worker_kinds else {
        return Ok(vec![WorkerKind::Threads]);
    };
    if v.get_ref().is_empty() {
        return Err(x.cx.err(
            v.span(),
            &x.at("worker_kinds"),
            "empty list; expected at least one value",
        ));
    }
    v.get_ref()
        .iter()
        .map(|k| match k.as_str() {
            "threads" => Ok(WorkerKind::Threads),
            "processes" => Ok(WorkerKind::Processes),
            other => Err(x.cx.err(
                v.span(),
                &x.at("worker_kinds"),
                format!("{other:?}; expected threads or processes"),
            )),
        })
        .collect()
}

/// `on_bad_sample`: skip (the default) or fail.
fn on_bad_sample(x: &LoaderCx, raw: &RawLoader) -> Result<OnBadSample, SuiteError> {
    let Some(v) = &raw.on_bad_sample else {
        return Ok(OnBadSample::Skip);
    };
    match v.get_ref().as_str() {
        "skip" => Ok(OnBadSample::Skip),
        "fail" => Ok(OnBadSample::Fail),
        other => Err(x.cx.err(
            v.span(),
            &x.at("on_bad_sample"),
            format!("{other:?}; expected \"skip\" or \"fail\""),
        )),
    }
}

/// An epoch that holds no batch measures nothing: refuse it here, where
/// the sample count is known (an image directory's is known only when it
/// is read; the driver records such a configuration as failed). A python
/// source's Dataset decides its own fetch, so `batched_fetch` is refused.
fn check_batch_fits(x: &LoaderCx, raw: &RawLoader, plan: &LoaderPlan) -> Result<(), SuiteError> {
    if let (DataPlan::Python { .. }, Some(v)) = (&plan.data, &raw.batched_fetch) {
        return Err(x.cx.err(
            v.span(),
            &x.at("batched_fetch"),
            "given with source = \"python\"; your own Dataset decides (the DataLoader calls its __getitems__ when it defines one)",
        ));
    }
    let known_samples = match &plan.data {
        DataPlan::Images { dir: Some(_), .. } | DataPlan::Python { .. } => None,
        DataPlan::FashionMnist { samples, .. } => Some(*samples),
        DataPlan::Tensor { samples }
        | DataPlan::Synthetic { samples, .. }
        | DataPlan::Images { samples, .. } => Some(*samples),
    };
    match known_samples {
        Some(samples) if plan.drop_last && samples < plan.batch_size => Err(x.cx.err(
            LoaderCx::span_or(&raw.batch_size, x.kind_span.clone()),
            &x.at("batch_size"),
            format!(
                "{} with {samples} samples and drop_last = true leaves no batch in an epoch; \
                 expected batch_size <= samples, or drop_last = false (one partial batch)",
                plan.batch_size
            ),
        )),
        _ => Ok(()),
    }
}

/// A stall experiment: the native engine and one loader configuration.
fn check_stall(x: &LoaderCx, raw: &RawLoader, plan: &LoaderPlan) -> Result<(), SuiteError> {
    let python = matches!(plan.data, DataPlan::Python { .. });
    if python || plan.engines != [EngineName::Native] {
        return Err(x.cx.err(
            LoaderCx::span_or(&raw.engines, x.source_span(raw)),
            &x.at(if python { "source" } else { "engines" }),
            "a stall experiment runs the differential method on the native engine; expected engines = [\"native\"] and a tensor, synthetic or images source (compare engines with kind = \"loader\")",
        ));
    }
    let span = |v: Option<Range<usize>>| v.unwrap_or(x.kind_span.clone());
    for (key, n, at) in [
        (
            "workers",
            plan.workers.len(),
            raw.workers.as_ref().map(|v| v.span()),
        ),
        (
            "worker_kinds",
            plan.kinds.len(),
            raw.worker_kinds.as_ref().map(|v| v.span()),
        ),
        (
            "prefetch",
            plan.prefetch.len(),
            raw.prefetch.as_ref().map(|v| v.span()),
        ),
        (
            "persistent",
            plan.persistent.len(),
            raw.persistent.as_ref().map(|v| v.span()),
        ),
        (
            "pinned",
            plan.pinned.len(),
            raw.pinned.as_ref().map(|v| v.span()),
        ),
        (
            "prefetch_to_device",
            plan.prefetch_to_device.len(),
            raw.prefetch_to_device.as_ref().map(|v| v.span()),
        ),
    ] {
        if n != 1 {
            return Err(x.cx.err(
                span(at),
                &x.at(key),
                format!(
                    "{n} values; a stall experiment takes one loader configuration (one value)"
                ),
            ));
        }
    }
    Ok(())
}

/// The most workers a suite may ask for.
const MAX_WORKERS: i64 = 256;

/// `workers = [0, 2, "auto"]`: numbers from 0 to 256, and `"auto"`, which
/// is this machine's cores less those the loop needs (none with
/// `model = "none"`, one for the training step otherwise). Returns the
/// counts (a repeat of one `auto` came to is dropped) and, with `auto`,
/// what it came to and why.
fn workers_knob(
    cx: &Located,
    v: &Option<Spanned<Vec<RawCount>>>,
    key: &str,
    default: &[usize],
    loader_only: bool,
) -> Result<(Vec<usize>, Option<String>), SuiteError> {
    let Some(v) = v else {
        return Ok((default.to_vec(), None));
    };
    if v.get_ref().is_empty() {
        return Err(cx.err(v.span(), key, "empty list; expected at least one value"));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let consumer = usize::from(!loader_only);
    let auto = cores.saturating_sub(consumer).max(1);
    let mut out: Vec<usize> = Vec::new();
    let mut note = None;
    for value in v.get_ref() {
        let n = match *value {
            RawCount::Number(x) if (0..=MAX_WORKERS).contains(&x) => x as usize,
            RawCount::Number(x) => {
                return Err(cx.err(
                    v.span(),
                    key,
                    format!("{x} is out of range; expected integers from 0 to {MAX_WORKERS}, or \"auto\""),
                ));
            }
            RawCount::Name(ref name) if name == "auto" => {
                note = Some(format!(
                    "\"auto\" = {auto}: {cores} cores seen, {consumer} kept for the loop ({})",
                    if loader_only {
                        "model = none: it only takes batches"
                    } else {
                        "the training step"
                    }
                ));
                auto
            }
            RawCount::Name(ref name) => {
                return Err(cx.err(
                    v.span(),
                    key,
                    format!("{name:?}; expected integers from 0 to {MAX_WORKERS}, or \"auto\""),
                ));
            }
        };
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok((out, note))
}
