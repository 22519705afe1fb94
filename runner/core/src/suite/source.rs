//! The data of a loader table: `source` and its own keys, checked against
//! the model into a [`DataPlan`].

use std::path::PathBuf;

use super::loader_cx::LoaderCx;
use super::located::SuiteError;
use super::plan::DataPlan;
use super::raw::RawLoader;
use crate::model_spec::ModelSpec;
use stallscope_loader::JpegDecoder;

/// The keys that belong to one source, and that source.
const SOURCE_KEYS: [(&str, &str); 5] = [
    ("decoder", "images"),
    ("scaled_decode", "images"),
    ("factory", "python"),
    ("args", "python"),
    ("python_path", "python"),
];

/// The source a loader table names (`tensor` when it names none).
pub(super) fn source_name(raw: Option<&RawLoader>) -> &str {
    raw.and_then(|l| l.source.as_ref())
        .map_or("tensor", |s| s.get_ref().as_str())
}

/// The data plan of `raw` for `model`, after the source's own keys are
/// checked to belong to it.
pub(super) fn data_plan(
    x: &LoaderCx,
    raw: &RawLoader,
    model: ModelSpec,
) -> Result<DataPlan, SuiteError> {
    let source = source_name(Some(raw));
    let span = x.source_span(raw);
    check_keys(x, raw, source)?;
    let default_samples = match source {
        "python" => 0,
        "images" | "synthetic" => 512,
        _ => 4096,
    };
    let samples = x.cx.int(
        &raw.samples,
        &x.at("samples"),
        default_samples,
        1,
        100_000_000,
    )? as usize;
    Ok(match (source, model) {
        ("python", _) => python(x, raw)?,
        ("tensor", ModelSpec::Linear { .. }) => DataPlan::Tensor { samples },
        ("fashionmnist", ModelSpec::FashionCnn) => DataPlan::FashionMnist {
            dir: raw.dir.as_ref().map(|d| PathBuf::from(d.get_ref())),
            samples,
        },
        ("synthetic", ModelSpec::Linear { .. }) => synthetic(x, raw, samples)?,
        ("images", ModelSpec::ImageCnn { size, .. }) => images(x, raw, samples, size)?,
        (s @ ("tensor" | "synthetic" | "images" | "fashionmnist"), m) => {
            return Err(x.cx.err(span, &x.at("source"), format!(
                "{s:?} with model {}; expected tensor or synthetic with linear, images with image_cnn (its image_size is the crop), fashionmnist with fashion_cnn",
                m.name()
            )));
        }
        (other, _) => {
            return Err(x.cx.err(
                span,
                &x.at("source"),
                format!("{other:?}; expected tensor, synthetic, images, fashionmnist or python"),
            ));
        }
    })
}

/// Keys of another source, and `samples` with a python source.
fn check_keys(x: &LoaderCx, raw: &RawLoader, source: &str) -> Result<(), SuiteError> {
    if source == "python"
        && let Some(v) = &raw.samples
    {
        return Err(x.cx.err(
            v.span(),
            &x.at("samples"),
            "given with source = \"python\"; the Dataset's own length is the sample count (return a torch.utils.data.Subset to use fewer)",
        ));
    }
    for (key, home) in SOURCE_KEYS {
        let present = match key {
            "decoder" => raw.decoder.is_some(),
            "scaled_decode" => raw.scaled_decode.is_some(),
            "factory" => raw.factory.is_some(),
            "args" => raw.args.is_some(),
            _ => raw.python_path.is_some(),
        };
        if present && source != home {
            return Err(x.cx.err(
                x.source_span(raw),
                &x.at(key),
                format!("given with source = {source:?}; it belongs to source = {home:?}"),
            ));
        }
    }
    Ok(())
}

/// `source = "python"`: the factory, its folder and its arguments.
fn python(x: &LoaderCx, raw: &RawLoader) -> Result<DataPlan, SuiteError> {
    let span = x.source_span(raw);
    let Some(factory) = &raw.factory else {
        return Err(x.cx.err(
            span,
            &x.at("factory"),
            "missing; source = \"python\" needs factory = \"module:function\" (a function returning a torch.utils.data.Dataset)",
        ));
    };
    let f = factory.get_ref();
    if !is_factory(f) {
        return Err(x.cx.err(
            factory.span(),
            &x.at("factory"),
            format!("{f:?}; expected \"module:function\", e.g. \"my_dataset:make\""),
        ));
    }
    let path = raw.python_path.as_ref().map_or_else(
        || x.suite_dir.to_path_buf(),
        |p| x.suite_dir.join(p.get_ref()),
    );
    let args = match &raw.args {
        None => serde_json::Map::new(),
        Some(t) => match serde_json::to_value(t) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => {
                return Err(x.cx.err(
                    span,
                    &x.at("args"),
                    "cannot be passed to Python; expected a table of numbers, strings, booleans, lists and tables",
                ));
            }
        },
    };
    Ok(DataPlan::Python {
        factory: f.clone(),
        path,
        args,
    })
}

/// `source = "synthetic"`: a per-sample wait and CPU work.
fn synthetic(x: &LoaderCx, raw: &RawLoader, samples: usize) -> Result<DataPlan, SuiteError> {
    let latency_ms = match &raw.latency_ms {
        Some(v) if !(0.0..=60_000.0).contains(v.get_ref()) => {
            return Err(x.cx.err(
                v.span(),
                &x.at("latency_ms"),
                format!(
                    "{} is out of range; expected 0 to 60000 milliseconds",
                    v.get_ref()
                ),
            ));
        }
        Some(v) => *v.get_ref(),
        None => 5.0,
    };
    let rounds = x.cx.int(
        &raw.cpu_work_rounds,
        &x.at("cpu_work_rounds"),
        0,
        0,
        1 << 40,
    )?;
    Ok(DataPlan::Synthetic {
        samples,
        latency_us: (latency_ms * 1000.0).round() as u64,
        cpu_work_rounds: rounds as u64,
    })
}

/// `source = "images"`: JPEG files (given or generated), resized and
/// cropped to the model's `size`.
fn images(
    x: &LoaderCx,
    raw: &RawLoader,
    samples: usize,
    size: i64,
) -> Result<DataPlan, SuiteError> {
    let int = |v: &Option<toml::Spanned<i64>>, key: &str, default: i64, min: i64| {
        x.cx.int(v, &x.at(key), default, min, 16384)
    };
    let decoder = match &raw.decoder {
        None => JpegDecoder::Auto,
        Some(v) => JpegDecoder::from_name(v.get_ref()).ok_or_else(|| {
            x.cx.err(
                v.span(),
                &x.at("decoder"),
                format!(
                    "{:?}; expected \"auto\", \"libjpeg-turbo\" or \"zune-jpeg\"",
                    v.get_ref()
                ),
            )
        })?,
    };
    Ok(DataPlan::Images {
        dir: raw.dir.as_ref().map(|d| PathBuf::from(d.get_ref())),
        samples,
        width: int(&raw.image_width, "image_width", 500, 1)? as u32,
        height: int(&raw.image_height, "image_height", 375, 1)? as u32,
        resize: x
            .cx
            .int(&raw.resize, &x.at("resize"), size + size / 7, size, 8192)? as u32,
        flip: raw.flip.unwrap_or(true),
        random_crop: raw.random_crop.unwrap_or(true),
        decoder,
        scaled_decode: raw.scaled_decode.unwrap_or(true),
    })
}

/// `module:function`, with a dotted module path.
pub(super) fn is_factory(f: &str) -> bool {
    f.split_once(':').is_some_and(|(m, func)| {
        !m.is_empty() && !func.is_empty() && m.split('.').all(is_identifier) && is_identifier(func)
    })
}

/// A Python identifier (ASCII letters, digits, `_`; not starting with a digit).
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
