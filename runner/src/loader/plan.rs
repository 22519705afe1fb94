//! The `loader` and `stall` kinds of a suite: the `[experiment.loader]`
//! table, parsed with spans and validated into a [`LoaderPlan`]; every error
//! names the file, line, column and key, and what was expected.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::{OnBadSample, WorkerKind};
use crate::models::ModelSpec;
use crate::suite::{ExperimentSpec, SuiteError};

/// `[experiment.loader]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLoader {
    source: Option<Spanned<String>>,
    samples: Option<Spanned<i64>>,
    latency_ms: Option<Spanned<f64>>,
    cpu_work_rounds: Option<Spanned<i64>>,
    dir: Option<Spanned<String>>,
    image_width: Option<Spanned<i64>>,
    image_height: Option<Spanned<i64>>,
    resize: Option<Spanned<i64>>,
    flip: Option<bool>,
    random_crop: Option<bool>,
    batch_size: Option<Spanned<i64>>,
    workers: Option<Spanned<Vec<i64>>>,
    worker_kinds: Option<Spanned<Vec<String>>>,
    prefetch: Option<Spanned<Vec<i64>>>,
    persistent: Option<Spanned<Vec<bool>>>,
    pinned: Option<Spanned<Vec<bool>>>,
    shuffle: Option<bool>,
    drop_last: Option<bool>,
    in_order: Option<bool>,
    on_bad_sample: Option<Spanned<String>>,
    /// Overrides applied with `--quick`.
    quick: Option<RawQuick>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQuick {
    samples: Option<Spanned<i64>>,
    workers: Option<Spanned<Vec<i64>>>,
    worker_kinds: Option<Spanned<Vec<String>>>,
}

/// Where the samples come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DataPlan {
    /// seeds/000 tensors generated in memory (features and classes of the
    /// linear model).
    Tensor { samples: usize },
    /// A fixed cost per sample: a sleep and/or CPU work.
    Synthetic {
        samples: usize,
        latency_us: u64,
        cpu_work_rounds: u64,
    },
    /// An image directory, or (no `dir`) a generated JPEG set of `samples`
    /// images of `width × height`.
    Images {
        dir: Option<PathBuf>,
        samples: usize,
        width: u32,
        height: u32,
        resize: u32,
        flip: bool,
        random_crop: bool,
    },
}

impl DataPlan {
    pub fn name(&self) -> &'static str {
        match self {
            DataPlan::Tensor { .. } => "tensor",
            DataPlan::Synthetic { .. } => "synthetic",
            DataPlan::Images { .. } => "images",
        }
    }
}

/// A validated loader experiment (or, for `stall`, one loader configuration).
#[derive(Debug, Clone, PartialEq)]
pub struct LoaderPlan {
    pub model: ModelSpec,
    pub data: DataPlan,
    pub batch_size: usize,
    pub workers: Vec<usize>,
    pub kinds: Vec<WorkerKind>,
    pub prefetch: Vec<usize>,
    pub persistent: Vec<bool>,
    pub pinned: Vec<bool>,
    pub shuffle: bool,
    pub drop_last: bool,
    pub in_order: bool,
    pub on_bad_sample: OnBadSample,
}

/// Where one experiment's text sits, for located errors.
pub struct Place<'a> {
    pub file: &'a str,
    pub text: &'a str,
    /// Index of the experiment in the suite.
    pub index: usize,
    /// Span of the experiment's `kind` (used when a key is missing).
    pub kind_span: std::ops::Range<usize>,
}

impl Place<'_> {
    fn err(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> SuiteError {
        let before = &self.text[..span.start.min(self.text.len())];
        SuiteError {
            file: self.file.into(),
            line: before.matches('\n').count() + 1,
            column: before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1,
            key: format!("experiment[{}].loader.{key}", self.index),
            message: message.into(),
        }
    }

    fn int(
        &self,
        v: &Option<Spanned<i64>>,
        key: &str,
        default: i64,
        min: i64,
        max: i64,
    ) -> Result<i64, SuiteError> {
        let Some(v) = v else { return Ok(default) };
        let x = *v.get_ref();
        if x < min || x > max {
            return Err(self.err(
                v.span(),
                key,
                format!("{x} is out of range; expected an integer from {min} to {max}"),
            ));
        }
        Ok(x)
    }

    fn ints(
        &self,
        v: &Option<Spanned<Vec<i64>>>,
        key: &str,
        default: &[i64],
        min: i64,
        max: i64,
    ) -> Result<Vec<usize>, SuiteError> {
        let Some(v) = v else {
            return Ok(default.iter().map(|&x| x as usize).collect());
        };
        if v.get_ref().is_empty() {
            return Err(self.err(v.span(), key, "empty list; expected at least one value"));
        }
        v.get_ref()
            .iter()
            .map(|&x| {
                if x < min || x > max {
                    Err(self.err(
                        v.span(),
                        key,
                        format!("{x} is out of range; expected integers from {min} to {max}"),
                    ))
                } else {
                    Ok(x as usize)
                }
            })
            .collect()
    }

    fn bools(
        &self,
        v: &Option<Spanned<Vec<bool>>>,
        key: &str,
        default: bool,
    ) -> Result<Vec<bool>, SuiteError> {
        match v {
            None => Ok(vec![default]),
            Some(v) if v.get_ref().is_empty() => {
                Err(self.err(v.span(), key, "empty list; expected at least one value"))
            }
            Some(v) => Ok(v.get_ref().clone()),
        }
    }
}

/// Parse `[experiment.loader]` for a `loader` or `stall` experiment.
pub fn parse(
    kind: &str,
    raw: Option<&RawLoader>,
    model: ModelSpec,
    quick: bool,
    place: &Place,
) -> Result<ExperimentSpec, SuiteError> {
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
    let source_span = raw
        .source
        .as_ref()
        .map_or(place.kind_span.clone(), |s| s.span());
    let source = raw
        .source
        .as_ref()
        .map_or("tensor", |s| s.get_ref().as_str());
    let default_samples = match source {
        "images" => 512,
        "synthetic" => 512,
        _ => 4096,
    };
    let samples = place.int(&raw.samples, "samples", default_samples, 1, 100_000_000)? as usize;
    let data = match (source, model) {
        ("tensor", ModelSpec::Linear { .. }) => DataPlan::Tensor { samples },
        ("synthetic", ModelSpec::Linear { .. }) => {
            let latency_ms = match &raw.latency_ms {
                Some(v) if !(0.0..=60_000.0).contains(v.get_ref()) => {
                    return Err(place.err(
                        v.span(),
                        "latency_ms",
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
                cpu_work_rounds: place.int(
                    &raw.cpu_work_rounds,
                    "cpu_work_rounds",
                    0,
                    0,
                    1 << 40,
                )? as u64,
            }
        }
        ("images", ModelSpec::ImageCnn { size, .. }) => {
            let resize = place.int(&raw.resize, "resize", size + size / 7, size, 8192)? as u32;
            DataPlan::Images {
                dir: raw.dir.as_ref().map(|d| PathBuf::from(d.get_ref())),
                samples,
                width: place.int(&raw.image_width, "image_width", 500, 1, 16384)? as u32,
                height: place.int(&raw.image_height, "image_height", 375, 1, 16384)? as u32,
                resize,
                flip: raw.flip.unwrap_or(true),
                random_crop: raw.random_crop.unwrap_or(true),
            }
        }
        (s @ ("tensor" | "synthetic" | "images"), m) => {
            return Err(place.err(source_span, "source", format!(
                "{s:?} with model {}; expected tensor or synthetic with linear, images with image_cnn (its image_size is the crop)",
                m.name()
            )));
        }
        (other, _) => {
            return Err(place.err(
                source_span,
                "source",
                format!("{other:?}; expected tensor, synthetic or images"),
            ));
        }
    };
    let kinds = match &raw.worker_kinds {
        None => vec![WorkerKind::Threads],
        Some(v) if v.get_ref().is_empty() => {
            return Err(place.err(
                v.span(),
                "worker_kinds",
                "empty list; expected at least one value",
            ));
        }
        Some(v) => v
            .get_ref()
            .iter()
            .map(|k| match k.as_str() {
                "threads" => Ok(WorkerKind::Threads),
                "processes" => Ok(WorkerKind::Processes),
                other => Err(place.err(
                    v.span(),
                    "worker_kinds",
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
                return Err(place.err(
                    v.span(),
                    "on_bad_sample",
                    format!("{other:?}; expected \"skip\" or \"fail\""),
                ));
            }
        },
    };
    let plan = LoaderPlan {
        model,
        data,
        batch_size: place.int(&raw.batch_size, "batch_size", 64, 1, 1 << 20)? as usize,
        workers: place.ints(
            &raw.workers,
            "workers",
            if kind == "stall" { &[2] } else { &[0, 2, 4] },
            0,
            256,
        )?,
        kinds,
        prefetch: place.ints(&raw.prefetch, "prefetch", &[2], 1, 64)?,
        persistent: place.bools(&raw.persistent, "persistent", false)?,
        pinned: place.bools(&raw.pinned, "pinned", false)?,
        shuffle: raw.shuffle.unwrap_or(false),
        drop_last: raw.drop_last.unwrap_or(kind == "stall"),
        in_order: raw.in_order.unwrap_or(true),
        on_bad_sample,
    };
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
                return Err(place.err(
                    span.unwrap_or(place.kind_span.clone()),
                    key,
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
