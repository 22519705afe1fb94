//! The `loader` and `stall` kinds: the `[experiment.loader]` table checked
//! into a [`LoaderPlan`].

use std::path::PathBuf;

use super::located::{Located, SuiteError};
use super::plan::{DataPlan, ExperimentSpec, LoaderPlan};
use super::raw::RawLoader;
use crate::loader::{OnBadSample, WorkerKind};
use crate::models::ModelSpec;

/// Parse `[experiment.loader]` for a `loader` or `stall` experiment.
pub(super) fn parse(
    kind: &str,
    raw: Option<&RawLoader>,
    model: ModelSpec,
    quick: bool,
    cx: &Located,
    index: usize,
    kind_span: std::ops::Range<usize>,
) -> Result<ExperimentSpec, SuiteError> {
    let at = |key: &str| format!("experiment[{index}].loader.{key}");
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
    }
    let source_span = raw.source.as_ref().map_or(kind_span.clone(), |s| s.span());
    let source = raw
        .source
        .as_ref()
        .map_or("tensor", |s| s.get_ref().as_str());
    let default_samples = match source {
        "images" => 512,
        "synthetic" => 512,
        _ => 4096,
    };
    let samples = cx.int(
        &raw.samples,
        &at("samples"),
        default_samples,
        1,
        100_000_000,
    )? as usize;
    let data = match (source, model) {
        ("tensor", ModelSpec::Linear { .. }) => DataPlan::Tensor { samples },
        ("synthetic", ModelSpec::Linear { .. }) => {
            let latency_ms = match &raw.latency_ms {
                Some(v) if !(0.0..=60_000.0).contains(v.get_ref()) => {
                    return Err(cx.err(
                        v.span(),
                        &at("latency_ms"),
                        format!(
                            "{} is out of range; expected 0 to 60000 milliseconds",
                            v.get_ref()
                        ),
                    ));
                }
                Some(v) => *v.get_ref(),
                None => 5.0,
            };
            DataPlan::Synthetic {
                samples,
                latency_us: (latency_ms * 1000.0).round() as u64,
                cpu_work_rounds: cx.int(
                    &raw.cpu_work_rounds,
                    &at("cpu_work_rounds"),
                    0,
                    0,
                    1 << 40,
                )? as u64,
            }
        }
        ("images", ModelSpec::ImageCnn { size, .. }) => {
            let resize = cx.int(&raw.resize, &at("resize"), size + size / 7, size, 8192)? as u32;
            DataPlan::Images {
                dir: raw.dir.as_ref().map(|d| PathBuf::from(d.get_ref())),
                samples,
                width: cx.int(&raw.image_width, &at("image_width"), 500, 1, 16384)? as u32,
                height: cx.int(&raw.image_height, &at("image_height"), 375, 1, 16384)? as u32,
                resize,
                flip: raw.flip.unwrap_or(true),
                random_crop: raw.random_crop.unwrap_or(true),
            }
        }
        (s @ ("tensor" | "synthetic" | "images"), m) => {
            return Err(cx.err(source_span, &at("source"), format!(
                "{s:?} with model {}; expected tensor or synthetic with linear, images with image_cnn (its image_size is the crop)",
                m.name()
            )));
        }
        (other, _) => {
            return Err(cx.err(
                source_span,
                &at("source"),
                format!("{other:?}; expected tensor, synthetic or images"),
            ));
        }
    };
    let kinds = match &raw.worker_kinds {
        None => vec![WorkerKind::Threads],
        Some(v) if v.get_ref().is_empty() => {
            return Err(cx.err(
                v.span(),
                &at("worker_kinds"),
                "empty list; expected at least one value",
            ));
        }
        Some(v) => v
            .get_ref()
            .iter()
            .map(|k| match k.as_str() {
                "threads" => Ok(WorkerKind::Threads),
                "processes" => Ok(WorkerKind::Processes),
                other => Err(cx.err(
                    v.span(),
                    &at("worker_kinds"),
                    format!("{other:?}; expected threads or processes"),
                )),
            })
            .collect::<Result<_, _>>()?,
    };
    let on_bad_sample = match &raw.on_bad_sample {
        None => OnBadSample::Skip,
        Some(v) => match v.get_ref().as_str() {
            "skip" => OnBadSample::Skip,
            "fail" => OnBadSample::Fail,
            other => {
                return Err(cx.err(
                    v.span(),
                    &at("on_bad_sample"),
                    format!("{other:?}; expected \"skip\" or \"fail\""),
                ));
            }
        },
    };
    let plan = LoaderPlan {
        model,
        data,
        batch_size: cx.int(&raw.batch_size, &at("batch_size"), 64, 1, 1 << 20)? as usize,
        workers: cx.ints(
            &raw.workers,
            &at("workers"),
            if kind == "stall" { &[2] } else { &[0, 2, 4] },
            0,
            256,
        )?,
        kinds,
        prefetch: cx.ints(&raw.prefetch, &at("prefetch"), &[2], 1, 64)?,
        persistent: cx.bools(&raw.persistent, &at("persistent"), false)?,
        pinned: cx.bools(&raw.pinned, &at("pinned"), false)?,
        shuffle: raw.shuffle.unwrap_or(false),
        drop_last: raw.drop_last.unwrap_or(kind == "stall"),
        in_order: raw.in_order.unwrap_or(true),
        on_bad_sample,
    };
    // An epoch that holds no batch measures nothing: refuse it here, where
    // the sample count is known (an image directory's is known only when it
    // is read; the driver records such a configuration as failed).
    let known_samples = match &plan.data {
        DataPlan::Images { dir: Some(_), .. } => None,
        DataPlan::Tensor { samples }
        | DataPlan::Synthetic { samples, .. }
        | DataPlan::Images { samples, .. } => Some(*samples),
    };
    if let Some(samples) = known_samples
        && plan.drop_last
        && samples < plan.batch_size
    {
        let span = raw
            .batch_size
            .as_ref()
            .map_or(kind_span.clone(), |v| v.span());
        return Err(cx.err(
            span,
            &at("batch_size"),
            format!(
                "{} with {samples} samples and drop_last = true leaves no batch in an epoch; \
                 expected batch_size <= samples, or drop_last = false (one partial batch)",
                plan.batch_size
            ),
        ));
    }
    if kind == "stall" {
        for (key, n, span) in [
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
        ] {
            if n != 1 {
                return Err(cx.err(
                    span.unwrap_or(kind_span.clone()),
                    &at(key),
                    format!(
                        "{n} values; a stall experiment takes one loader configuration (one value)"
                    ),
                ));
            }
        }
        return Ok(ExperimentSpec::Stall(plan));
    }
    Ok(ExperimentSpec::Loader(plan))
}
