//! The `loader` and `stall` kinds: the `[experiment.loader]` table checked
//! into a [`LoaderPlan`].

use std::path::PathBuf;

use super::located::{Located, SuiteError};
use super::plan::{DataPlan, EngineName, ExperimentSpec, LoaderPlan, MpContext};
use super::raw::{RawCount, RawLoader};
use crate::model_spec::ModelSpec;
use stallscope_loader::{JpegDecoder, OnBadSample, WorkerKind};
use toml::Spanned;

/// The engines a suite may name.
const ENGINES: [(&str, EngineName); 3] = [
    ("native", EngineName::Native),
    ("pytorch", EngineName::Pytorch),
    ("spdl", EngineName::Spdl),
];

/// The source a loader table names (`tensor` when it names none).
pub(super) fn source_name(raw: Option<&RawLoader>) -> &str {
    raw.and_then(|l| l.source.as_ref())
        .map_or("tensor", |s| s.get_ref().as_str())
}

/// Parse `[experiment.loader]` for a `loader` or `stall` experiment.
/// `loader_only` is `model = "none"`; `model` then only carries the shape
/// of the data. `suite_dir` anchors a relative `python_path`.
#[allow(clippy::too_many_arguments)]
pub(super) fn parse(
    kind: &str,
    raw: Option<&RawLoader>,
    model: ModelSpec,
    loader_only: bool,
    suite_dir: &std::path::Path,
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
        if q.engines.is_some() {
            raw.engines = q.engines;
        }
    }
    let source_span = raw.source.as_ref().map_or(kind_span.clone(), |s| s.span());
    let source = raw
        .source
        .as_ref()
        .map_or("tensor", |s| s.get_ref().as_str());
    let default_samples = match source {
        "python" => 0,
        "fashionmnist" => 4096,
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
        ("python", _) => {
            let Some(factory) = &raw.factory else {
                return Err(cx.err(
                    source_span,
                    &at("factory"),
                    "missing; source = \"python\" needs factory = \"module:function\" (a function returning a torch.utils.data.Dataset)",
                ));
            };
            let f = factory.get_ref();
            let ok = f.split_once(':').is_some_and(|(m, func)| {
                !m.is_empty()
                    && !func.is_empty()
                    && m.split('.').all(is_identifier)
                    && is_identifier(func)
            });
            if !ok {
                return Err(cx.err(
                    factory.span(),
                    &at("factory"),
                    format!("{f:?}; expected \"module:function\", e.g. \"my_dataset:make\""),
                ));
            }
            let path = raw
                .python_path
                .as_ref()
                .map_or_else(|| suite_dir.to_path_buf(), |p| suite_dir.join(p.get_ref()));
            let args = match &raw.args {
                None => serde_json::Map::new(),
                Some(t) => match serde_json::to_value(t) {
                    Ok(serde_json::Value::Object(m)) => m,
                    _ => {
                        return Err(cx.err(
                            source_span.clone(),
                            &at("args"),
                            "cannot be passed to Python; expected a table of numbers, strings, booleans, lists and tables",
                        ));
                    }
                },
            };
            DataPlan::Python {
                factory: f.clone(),
                path,
                args,
            }
        }
        ("tensor", ModelSpec::Linear { .. }) => DataPlan::Tensor { samples },
        ("fashionmnist", ModelSpec::FashionCnn) => DataPlan::FashionMnist {
            dir: raw.dir.as_ref().map(|d| PathBuf::from(d.get_ref())),
            samples,
        },
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
                decoder: match &raw.decoder {
                    None => JpegDecoder::Auto,
                    Some(v) => match JpegDecoder::from_name(v.get_ref()) {
                        Some(d) => d,
                        None => {
                            let other = v.get_ref();
                            return Err(cx.err(
                                v.span(),
                                &at("decoder"),
                                format!(
                                    "{other:?}; expected \"auto\", \"libjpeg-turbo\" or \"zune-jpeg\""
                                ),
                            ));
                        }
                    },
                },
                scaled_decode: raw.scaled_decode.unwrap_or(true),
            }
        }
        (s @ ("tensor" | "synthetic" | "images" | "fashionmnist"), m) => {
            return Err(cx.err(source_span, &at("source"), format!(
                "{s:?} with model {}; expected tensor or synthetic with linear, images with image_cnn (its image_size is the crop), fashionmnist with fashion_cnn",
                m.name()
            )));
        }
        (other, _) => {
            return Err(cx.err(
                source_span,
                &at("source"),
                format!("{other:?}; expected tensor, synthetic, images, fashionmnist or python"),
            ));
        }
    };
    if source == "python"
        && let Some(v) = &raw.samples
    {
        return Err(cx.err(
            v.span(),
            &at("samples"),
            "given with source = \"python\"; the Dataset's own length is the sample count (return a torch.utils.data.Subset to use fewer)",
        ));
    }
    for (key, present, home) in [
        ("decoder", raw.decoder.is_some(), "images"),
        ("scaled_decode", raw.scaled_decode.is_some(), "images"),
        ("factory", raw.factory.is_some(), "python"),
        ("args", raw.args.is_some(), "python"),
        ("python_path", raw.python_path.is_some(), "python"),
    ] {
        if present && source != home {
            return Err(cx.err(
                source_span.clone(),
                &at(key),
                format!("given with source = {source:?}; it belongs to source = {home:?}"),
            ));
        }
    }
    let python = source == "python";
    let engines = cx.choices(
        &raw.engines,
        &at("engines"),
        if python {
            &[EngineName::Pytorch]
        } else {
            &[EngineName::Native]
        },
        &ENGINES,
    )?;
    if python && engines != [EngineName::Pytorch] {
        let span = raw
            .engines
            .as_ref()
            .map_or(source_span.clone(), |v| v.span());
        return Err(cx.err(
            span,
            &at("engines"),
            "source = \"python\" runs your own Dataset through the PyTorch DataLoader; expected engines = [\"pytorch\"]",
        ));
    }
    let contexts = cx.choices(
        &raw.contexts,
        &at("contexts"),
        &[MpContext::Fork],
        &[
            ("fork", MpContext::Fork),
            ("spawn", MpContext::Spawn),
            ("forkserver", MpContext::Forkserver),
        ],
    )?;
    if contexts.len() > 1 && !engines.contains(&EngineName::Pytorch) {
        let span = raw
            .contexts
            .as_ref()
            .map_or(kind_span.clone(), |v| v.span());
        return Err(cx.err(
            span,
            &at("contexts"),
            "the start method of DataLoader workers is a pytorch knob; expected \"pytorch\" in engines",
        ));
    }
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
    let (workers, workers_auto) = workers_knob(
        cx,
        &raw.workers,
        &at("workers"),
        if kind == "stall" { &[2] } else { &[0, 2, 4] },
        loader_only,
    )?;
    let plan = LoaderPlan {
        model,
        loader_only,
        engines,
        contexts,
        prefetch_to_device: cx.bools(&raw.prefetch_to_device, &at("prefetch_to_device"), false)?,
        data,
        batch_size: cx.int(&raw.batch_size, &at("batch_size"), 64, 1, 1 << 20)? as usize,
        workers,
        workers_auto,
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
        DataPlan::Images { dir: Some(_), .. } | DataPlan::Python { .. } => None,
        DataPlan::FashionMnist { samples, .. } => Some(*samples),
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
        if python || plan.engines != [EngineName::Native] {
            let span = raw
                .engines
                .as_ref()
                .map_or(source_span.clone(), |v| v.span());
            return Err(cx.err(
                span,
                &at(if python { "source" } else { "engines" }),
                "a stall experiment runs the differential method on the native engine; expected engines = [\"native\"] and a tensor, synthetic or images source (compare engines with kind = \"loader\")",
            ));
        }
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
            (
                "prefetch_to_device",
                plan.prefetch_to_device.len(),
                raw.prefetch_to_device.as_ref().map(|v| v.span()),
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

/// A Python identifier (ASCII letters, digits, `_`; not starting with a digit).
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
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
