//! Suites: TOML files that list experiments, parsed with spans and validated
//! into a [`Plan`]. Every error names the file, the line and column, the key
//! and what was expected. Presets are ordinary files in `fixtures/suites/`,
//! embedded in the binary.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::models::ModelSpec;

/// The preset suites, by name.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "quickstart",
        include_str!("../../fixtures/suites/quickstart.toml"),
    ),
    (
        "fashionmnist-batch-sweep",
        include_str!("../../fixtures/suites/fashionmnist-batch-sweep.toml"),
    ),
    (
        "transfer",
        include_str!("../../fixtures/suites/transfer.toml"),
    ),
    ("wgpu", include_str!("../../fixtures/suites/wgpu.toml")),
    (
        "workers-light",
        include_str!("../../fixtures/suites/workers-light.toml"),
    ),
    (
        "image-pipeline",
        include_str!("../../fixtures/suites/image-pipeline.toml"),
    ),
    ("stall", include_str!("../../fixtures/suites/stall.toml")),
];

/// A suite problem, located.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}:{line}:{column}: {key}: {message}")]
pub struct SuiteError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// The key at fault (`experiment[2].batch_sizes`), or `(document)`.
    pub key: String,
    pub message: String,
}

/// A validated suite: what `stallscope run` executes.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: String,
    pub title: String,
    pub path: Option<PathBuf>,
    /// The TOML text as read (recorded in the bundle).
    pub toml: String,
    pub seed: u64,
    pub data_seed: u64,
    /// libtorch's intra-op thread count for the whole run (seeds/000 used 1);
    /// `None` leaves libtorch's default.
    pub torch_threads: Option<i32>,
    pub experiments: Vec<ExperimentPlan>,
}

/// One experiment of a plan.
#[derive(Debug, Clone)]
pub struct ExperimentPlan {
    pub id: String,
    pub title: Option<String>,
    pub repeats: u32,
    pub epochs: u32,
    pub spec: ExperimentSpec,
}

/// Data an experiment trains on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataSpec {
    /// FashionMNIST (IDX from `--data-dir`, else synthetic), first `samples`.
    FashionMnist { samples: usize },
    /// seeds/000 tensors generated in memory.
    Tensor {
        samples: usize,
        features: usize,
        classes: usize,
    },
}

/// What an experiment measures, with its grid.
#[derive(Debug, Clone, PartialEq)]
pub enum ExperimentSpec {
    Compute {
        model: ModelSpec,
        batch_sizes: Vec<i64>,
        steps: u32,
    },
    Transfer {
        sizes_bytes: Vec<u64>,
        copies: u32,
        pinned: Vec<bool>,
        non_blocking: Vec<bool>,
    },
    BatchSweep {
        model: ModelSpec,
        data: DataSpec,
        batch_sizes: Vec<i64>,
    },
    OomProbe {
        model: ModelSpec,
        memory_fraction: f64,
        start_batch: i64,
        max_batch: i64,
    },
    /// Loader knobs swept (`[experiment.loader]`, see `crate::loader::plan`).
    Loader(crate::loader::plan::LoaderPlan),
    /// Differential stall attribution for one loader configuration.
    Stall(crate::loader::plan::LoaderPlan),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    title: Option<String>,
    seed: Option<u64>,
    data_seed: Option<u64>,
    torch_threads: Option<Spanned<i64>>,
    repeats: Option<Spanned<i64>>,
    epochs: Option<Spanned<i64>>,
    #[serde(default)]
    experiment: Vec<RawExperiment>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct RawKnobs {
    repeats: Option<Spanned<i64>>,
    epochs: Option<Spanned<i64>>,
    samples: Option<Spanned<i64>>,
    batch_sizes: Option<Spanned<Vec<i64>>>,
    steps: Option<Spanned<i64>>,
    sizes_kib: Option<Spanned<Vec<i64>>>,
    copies: Option<Spanned<i64>>,
    max_batch: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    id: Spanned<String>,
    kind: Spanned<String>,
    title: Option<String>,
    model: Option<Spanned<String>>,
    data: Option<Spanned<String>>,
    features: Option<Spanned<i64>>,
    classes: Option<Spanned<i64>>,
    image_size: Option<Spanned<i64>>,
    pinned: Option<Vec<bool>>,
    non_blocking: Option<Vec<bool>>,
    memory_fraction: Option<Spanned<f64>>,
    start_batch: Option<Spanned<i64>>,
    repeats: Option<Spanned<i64>>,
    epochs: Option<Spanned<i64>>,
    samples: Option<Spanned<i64>>,
    batch_sizes: Option<Spanned<Vec<i64>>>,
    steps: Option<Spanned<i64>>,
    sizes_kib: Option<Spanned<Vec<i64>>>,
    copies: Option<Spanned<i64>>,
    max_batch: Option<Spanned<i64>>,
    /// `[experiment.loader]` of the loader and stall kinds.
    loader: Option<crate::loader::plan::RawLoader>,
    /// Overrides applied with `--quick`.
    quick: Option<RawKnobs>,
}

/// Where a byte offset falls: (line, column), both 1-based.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> SuiteError {
        let (line, column) = line_col(self.text, span.start);
        SuiteError {
            file: self.file.into(),
            line,
            column,
            key: key.into(),
            message: message.into(),
        }
    }

    fn positive(&self, v: &Spanned<i64>, key: &str, max: i64) -> Result<i64, SuiteError> {
        let x = *v.get_ref();
        if x < 1 || x > max {
            return Err(self.err(
                v.span(),
                key,
                format!("{x} is out of range; expected an integer from 1 to {max}"),
            ));
        }
        Ok(x)
    }

    fn positive_list(
        &self,
        v: &Spanned<Vec<i64>>,
        key: &str,
        max: i64,
    ) -> Result<Vec<i64>, SuiteError> {
        if v.get_ref().is_empty() {
            return Err(self.err(v.span(), key, "empty list; expected at least one value"));
        }
        for &x in v.get_ref() {
            if x < 1 || x > max {
                return Err(self.err(
                    v.span(),
                    key,
                    format!("{x} is out of range; expected integers from 1 to {max}"),
                ));
            }
        }
        Ok(v.get_ref().clone())
    }
}

/// Parse and validate suite text. `file` names it in errors.
pub fn parse_suite(
    text: &str,
    file: &str,
    name: &str,
    path: Option<&Path>,
    quick: bool,
) -> Result<Plan, SuiteError> {
    let cx = Ctx { file, text };
    let raw: RawSuite = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let (line, column) = line_col(text, span.start);
        let key = key_at(text, span.start);
        SuiteError {
            file: file.into(),
            line,
            column,
            key,
            message: e.message().trim().to_string(),
        }
    })?;
    let base_repeats = match &raw.repeats {
        Some(v) => cx.positive(v, "repeats", 100)? as u32,
        None => 3,
    };
    let base_epochs = match &raw.epochs {
        Some(v) => cx.positive(v, "epochs", 1000)? as u32,
        None => 2,
    };
    if raw.experiment.is_empty() {
        return Err(cx.err(
            0..0,
            "experiment",
            "no [[experiment]] table; expected at least one",
        ));
    }
    let mut experiments: Vec<ExperimentPlan> = Vec::new();
    for (i, e) in raw.experiment.into_iter().enumerate() {
        let at = |k: &str| format!("experiment[{i}].{k}");
        let id = e.id.get_ref().clone();
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(cx.err(
                e.id.span(),
                &at("id"),
                format!("{id:?}; expected letters, digits, '_' or '-'"),
            ));
        }
        if experiments.iter().any(|x| x.id == id) {
            return Err(cx.err(
                e.id.span(),
                &at("id"),
                format!("{id:?} is used twice; expected unique ids"),
            ));
        }
        let mut k = RawKnobs {
            repeats: e.repeats.clone(),
            epochs: e.epochs.clone(),
            samples: e.samples.clone(),
            batch_sizes: e.batch_sizes.clone(),
            steps: e.steps.clone(),
            sizes_kib: e.sizes_kib.clone(),
            copies: e.copies.clone(),
            max_batch: e.max_batch.clone(),
        };
        if quick && let Some(q) = &e.quick {
            macro_rules! over {
                ($($f:ident),*) => { $( if q.$f.is_some() { k.$f = q.$f.clone(); } )* };
            }
            over!(
                repeats,
                epochs,
                samples,
                batch_sizes,
                steps,
                sizes_kib,
                copies,
                max_batch
            );
        }
        let repeats = match &k.repeats {
            Some(v) => cx.positive(v, &at("repeats"), 100)? as u32,
            None => base_repeats,
        };
        let epochs = match &k.epochs {
            Some(v) => cx.positive(v, &at("epochs"), 1000)? as u32,
            None => base_epochs,
        };
        let model = |default: &str| -> Result<ModelSpec, SuiteError> {
            let (name, span) = match &e.model {
                Some(m) => (m.get_ref().as_str(), m.span()),
                None => (default, e.kind.span()),
            };
            match name {
                "fashion_cnn" => Ok(ModelSpec::FashionCnn),
                "linear" => Ok(ModelSpec::Linear {
                    features: e
                        .features
                        .as_ref()
                        .map_or(Ok(64), |v| cx.positive(v, &at("features"), 1 << 20))?,
                    classes: e
                        .classes
                        .as_ref()
                        .map_or(Ok(4), |v| cx.positive(v, &at("classes"), 100_000))?,
                }),
                "image_cnn" => Ok(ModelSpec::ImageCnn {
                    size: e
                        .image_size
                        .as_ref()
                        .map_or(Ok(224), |v| cx.positive(v, &at("image_size"), 4096))?,
                    classes: e
                        .classes
                        .as_ref()
                        .map_or(Ok(1000), |v| cx.positive(v, &at("classes"), 100_000))?,
                }),
                other => Err(cx.err(
                    span,
                    &at("model"),
                    format!("{other:?}; expected fashion_cnn, linear or image_cnn"),
                )),
            }
        };
        let batch_sizes = |default: &[i64]| -> Result<Vec<i64>, SuiteError> {
            match &k.batch_sizes {
                Some(v) => cx.positive_list(v, &at("batch_sizes"), 1 << 24),
                None => Ok(default.to_vec()),
            }
        };
        let spec = match e.kind.get_ref().as_str() {
            "compute" => ExperimentSpec::Compute {
                model: model("fashion_cnn")?,
                batch_sizes: batch_sizes(&[256])?,
                steps: k
                    .steps
                    .as_ref()
                    .map_or(Ok(20), |v| cx.positive(v, &at("steps"), 1_000_000))?
                    as u32,
            },
            "transfer" => ExperimentSpec::Transfer {
                sizes_bytes: match &k.sizes_kib {
                    Some(v) => cx.positive_list(v, &at("sizes_kib"), 16 << 20)?,
                    None => vec![784],
                }
                .into_iter()
                .map(|kib| kib as u64 * 1024)
                .collect(),
                copies: k
                    .copies
                    .as_ref()
                    .map_or(Ok(20), |v| cx.positive(v, &at("copies"), 1_000_000))?
                    as u32,
                pinned: e.pinned.clone().unwrap_or_else(|| vec![false, true]),
                non_blocking: e.non_blocking.clone().unwrap_or_else(|| vec![false, true]),
            },
            "batch_sweep" => {
                let model = model("fashion_cnn")?;
                let samples = k
                    .samples
                    .as_ref()
                    .map_or(Ok(60_000), |v| cx.positive(v, &at("samples"), 100_000_000))?
                    as usize;
                let data_name = e
                    .data
                    .as_ref()
                    .map_or("fashionmnist", |d| d.get_ref().as_str());
                let data = match (data_name, model) {
                    ("fashionmnist", ModelSpec::FashionCnn) => DataSpec::FashionMnist { samples },
                    ("tensor", ModelSpec::Linear { features, classes }) => DataSpec::Tensor {
                        samples,
                        features: features as usize,
                        classes: classes as usize,
                    },
                    (d, m) => {
                        let span = e.data.as_ref().map_or(e.kind.span(), |d| d.span());
                        return Err(cx.err(
                            span,
                            &at("data"),
                            format!("{d:?} with model {}; expected fashionmnist with fashion_cnn, or tensor with linear", m.name()),
                        ));
                    }
                };
                ExperimentSpec::BatchSweep {
                    model,
                    data,
                    batch_sizes: batch_sizes(&[32, 64, 128, 256, 512, 1024, 2048, 4096, 8192])?,
                }
            }
            "oom_probe" => {
                let fraction = match &e.memory_fraction {
                    Some(v) => {
                        let f = *v.get_ref();
                        if !(f > 0.0 && f <= 1.0) {
                            return Err(cx.err(
                                v.span(),
                                &at("memory_fraction"),
                                format!("{f} is out of range; expected a number in (0, 1]"),
                            ));
                        }
                        f
                    }
                    None => 0.25,
                };
                let start = e
                    .start_batch
                    .as_ref()
                    .map_or(Ok(1024), |v| cx.positive(v, &at("start_batch"), 1 << 30))?;
                let max = k
                    .max_batch
                    .as_ref()
                    .map_or(Ok(1 << 20), |v| cx.positive(v, &at("max_batch"), 1 << 30))?;
                if max < start {
                    let span = k.max_batch.as_ref().map_or(e.kind.span(), |v| v.span());
                    return Err(cx.err(
                        span,
                        &at("max_batch"),
                        format!(
                            "{max} is below start_batch {start}; expected max_batch >= start_batch"
                        ),
                    ));
                }
                ExperimentSpec::OomProbe {
                    model: model("fashion_cnn")?,
                    memory_fraction: fraction,
                    start_batch: start,
                    max_batch: max,
                }
            }
            kind @ ("loader" | "stall") => crate::loader::plan::parse(
                kind,
                e.loader.as_ref(),
                model("linear")?,
                quick,
                &crate::loader::plan::Place {
                    file: cx.file,
                    text: cx.text,
                    index: i,
                    kind_span: e.kind.span(),
                },
            )?,
            other => {
                return Err(cx.err(
                    e.kind.span(),
                    &at("kind"),
                    format!("{other:?}; expected compute, transfer, batch_sweep, oom_probe, loader or stall"),
                ));
            }
        };
        experiments.push(ExperimentPlan {
            id,
            title: e.title.clone(),
            repeats,
            epochs,
            spec,
        });
    }
    let torch_threads = match &raw.torch_threads {
        Some(v) => Some(cx.positive(v, "torch_threads", 1024)? as i32),
        None => None,
    };
    Ok(Plan {
        name: name.into(),
        title: raw.title.unwrap_or_else(|| name.to_string()),
        path: path.map(Path::to_path_buf),
        toml: text.into(),
        seed: raw.seed.unwrap_or(42),
        data_seed: raw.data_seed.unwrap_or(0),
        torch_threads,
        experiments,
    })
}

/// The key written at the start of the line holding `offset` (for parse
/// errors, whose span points into that line), with its table.
fn key_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let table = text[..line_start]
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('['))
        .map(|l| l.trim().trim_matches(|c| c == '[' || c == ']').to_string());
    let key = line.split('=').next().unwrap_or("").trim();
    match (table, key.is_empty() || key.starts_with('[')) {
        (_, true) => "(document)".into(),
        (Some(t), false) => format!("{t}.{key}"),
        (None, false) => key.into(),
    }
}

/// Errors finding a suite.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no preset named {name:?}; expected one of: {}", PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", "))]
    NoPreset { name: String },
    #[error(transparent)]
    Suite(#[from] SuiteError),
}

/// Load a suite file, or a preset by name (quickstart when neither).
pub fn load(path: Option<&Path>, preset: Option<&str>, quick: bool) -> Result<Plan, LoadError> {
    if let Some(path) = path {
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
            path: path.into(),
            source,
        })?;
        let name = path
            .file_stem()
            .map_or("suite".into(), |s| s.to_string_lossy().into_owned());
        return Ok(parse_suite(
            &text,
            &path.display().to_string(),
            &name,
            Some(path),
            quick,
        )?);
    }
    let name = preset.unwrap_or("quickstart");
    let (_, text) = PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| LoadError::NoPreset { name: name.into() })?;
    Ok(parse_suite(
        text,
        &format!("preset {name}"),
        name,
        None,
        quick,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses_in_both_modes() {
        for (name, text) in PRESETS {
            for quick in [false, true] {
                let plan = parse_suite(text, name, name, None, quick).unwrap();
                assert!(!plan.experiments.is_empty(), "{name}");
            }
        }
    }

    #[test]
    fn every_file_in_fixtures_suites_is_an_embedded_preset() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/suites");
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let name = path.file_stem().unwrap().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(&path).unwrap();
                let embedded = PRESETS.iter().find(|(n, _)| *n == name);
                assert_eq!(
                    embedded.map(|p| p.1),
                    Some(text.as_str()),
                    "{name} is not in PRESETS"
                );
                parse_suite(
                    &text,
                    &path.display().to_string(),
                    &name,
                    Some(&path),
                    false,
                )
                .unwrap();
            }
        }
    }

    fn err(text: &str) -> String {
        parse_suite(text, "s.toml", "s", None, false)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn bad_suites_name_file_line_key_and_expectation() {
        let e = err("[[experiment]]\nid = \"a\"\nkind = \"compute\"\nbatch_sizes = [64, 0]\n");
        assert!(
            e.starts_with("s.toml:4:15: experiment[0].batch_sizes: 0 is out of range"),
            "{e}"
        );
        let e = err("[[experiment]]\nid = \"a\"\nkind = \"nope\"\n");
        assert!(
            e.starts_with("s.toml:3:8: experiment[0].kind: \"nope\"; expected compute"),
            "{e}"
        );
        let e = err("[[experiment]]\nid = \"a\"\nkind = \"compute\"\nbatchsize = 3\n");
        assert!(
            e.starts_with("s.toml:4:1: experiment.batchsize: unknown field `batchsize`"),
            "{e}"
        );
        let e = err("repeats = \"three\"\n[[experiment]]\nid = \"a\"\nkind = \"compute\"\n");
        assert!(e.starts_with("s.toml:1:11: repeats: invalid type"), "{e}");
        let e = err("[[experiment]]\nid = \"a\"\nkind = \"oom_probe\"\nmemory_fraction = 1.5\n");
        assert!(e.contains("s.toml:4:19: experiment[0].memory_fraction: 1.5 is out of range; expected a number in (0, 1]"), "{e}");
        let e = err("title = \"x\"\n");
        assert!(e.contains("expected at least one"), "{e}");
        let e = err("torch_threads = 0\n[[experiment]]\nid = \"a\"\nkind = \"compute\"\n");
        assert!(
            e.starts_with(
                "s.toml:1:17: torch_threads: 0 is out of range; expected an integer from 1"
            ),
            "{e}"
        );
    }

    #[test]
    fn torch_threads_is_read() {
        let text = "torch_threads = 1\n[[experiment]]\nid = \"a\"\nkind = \"compute\"\n";
        let plan = parse_suite(text, "s.toml", "s", None, false).unwrap();
        assert_eq!(plan.torch_threads, Some(1));
    }

    #[test]
    fn quick_overrides_apply_only_with_quick() {
        let text = "[[experiment]]\nid = \"a\"\nkind = \"batch_sweep\"\nbatch_sizes = [32, 64]\nquick = { batch_sizes = [128], repeats = 1 }\n";
        let full = parse_suite(text, "s", "s", None, false).unwrap();
        let quick = parse_suite(text, "s", "s", None, true).unwrap();
        assert_eq!(full.experiments[0].repeats, 3);
        assert_eq!(quick.experiments[0].repeats, 1);
        match &quick.experiments[0].spec {
            ExperimentSpec::BatchSweep { batch_sizes, .. } => assert_eq!(batch_sizes, &vec![128]),
            _ => panic!(),
        }
    }
}
