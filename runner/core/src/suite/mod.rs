//! Suites: TOML files that list experiments, turned into a validated
//! [`Plan`] in layers — `raw` (the TOML types, with spans), `kinds` and
//! `loader` (a parser per experiment kind), `plan` (the validated types) and
//! `located` (the one helper for errors). Every error names the file, the
//! line and column, the key and what was expected. Presets are ordinary files
//! in `fixtures/suites/`, embedded in the binary.
//!
//! A public namespace of the core (`stallscope_core::suite`): its layers are
//! private and what other crates use is re-exported here.

mod kinds;
mod loader;
mod loader_cx;
mod located;
mod plan;
mod ranks;
mod raw;
mod source;
mod user_model;

use std::path::{Path, PathBuf};

pub use located::SuiteError;
pub use plan::*;
pub use ranks::{DEFAULT_RANK_TIMEOUT_S, RankKnobs, SlowRank};

use kinds::ExperimentCx;
use located::{Located, key_at, line_col};
use raw::{RawExperiment, RawKnobs, RawSuite};

/// The preset suites, by name.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "quickstart",
        include_str!("../../../../fixtures/suites/quickstart.toml"),
    ),
    (
        "fashionmnist-batch-sweep",
        include_str!("../../../../fixtures/suites/fashionmnist-batch-sweep.toml"),
    ),
    (
        "transfer",
        include_str!("../../../../fixtures/suites/transfer.toml"),
    ),
    (
        "wgpu",
        include_str!("../../../../fixtures/suites/wgpu.toml"),
    ),
    (
        "workers-light",
        include_str!("../../../../fixtures/suites/workers-light.toml"),
    ),
    (
        "image-pipeline",
        include_str!("../../../../fixtures/suites/image-pipeline.toml"),
    ),
    (
        "stall",
        include_str!("../../../../fixtures/suites/stall.toml"),
    ),
    (
        "reproduce-tutorial",
        include_str!("../../../../fixtures/suites/reproduce-tutorial.toml"),
    ),
    (
        "reproduce-seeds000",
        include_str!("../../../../fixtures/suites/reproduce-seeds000.toml"),
    ),
    (
        "reproduce-spdl",
        include_str!("../../../../fixtures/suites/reproduce-spdl.toml"),
    ),
    (
        "reproduce-nodes",
        include_str!("../../../../fixtures/suites/reproduce-nodes.toml"),
    ),
];

/// Parse and validate suite text. `file` names it in errors.
pub fn parse_suite(
    text: &str,
    file: &str,
    name: &str,
    path: Option<&Path>,
    quick: bool,
) -> Result<Plan, SuiteError> {
    let cx = Located { file, text };
    let raw: RawSuite = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let (line, column) = line_col(text, span.start);
        SuiteError {
            file: file.into(),
            line,
            column,
            key: key_at(text, span.start),
            message: e.message().trim().to_string(),
        }
    })?;
    let base = (
        raw.repeats
            .as_ref()
            .map_or(Ok(3), |v| cx.positive(v, "repeats", 100))? as u32,
        raw.epochs
            .as_ref()
            .map_or(Ok(2), |v| cx.positive(v, "epochs", 1000))? as u32,
    );
    if raw.experiment.is_empty() {
        return Err(cx.err(
            0..0,
            "experiment",
            "no [[experiment]] table; expected at least one",
        ));
    }
    let rank_knobs = ranks::parse(&raw, &cx)?;
    let suite_dir = path
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut experiments: Vec<ExperimentPlan> = Vec::new();
    for (i, e) in raw.experiment.iter().enumerate() {
        let at = SuiteAt {
            cx: &cx,
            suite_dir: &suite_dir,
            quick,
            base,
        };
        let plan = at.experiment(i, e, &experiments)?;
        experiments.push(plan);
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
        ranks: rank_knobs,
        experiments,
    })
}

/// What every experiment of a suite is parsed with: the text, the suite's
/// folder, `--quick`, and the suite's own repeats and epochs.
struct SuiteAt<'a> {
    cx: &'a Located<'a>,
    suite_dir: &'a Path,
    quick: bool,
    base: (u32, u32),
}

impl SuiteAt<'_> {
    /// `[[experiment]]` number `i`: its id (unique among `before`), its
    /// knobs after `--quick`, and its kind's spec.
    fn experiment(
        &self,
        i: usize,
        e: &RawExperiment,
        before: &[ExperimentPlan],
    ) -> Result<ExperimentPlan, SuiteError> {
        let cx = self.cx;
        let at = |k: &str| format!("experiment[{i}].{k}");
        let id = e.id.get_ref().clone();
        let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if id.is_empty() || !id.chars().all(valid) {
            return Err(cx.err(
                e.id.span(),
                &at("id"),
                format!("{id:?}; expected letters, digits, '_' or '-'"),
            ));
        }
        if before.iter().any(|x| x.id == id) {
            return Err(cx.err(
                e.id.span(),
                &at("id"),
                format!("{id:?} is used twice; expected unique ids"),
            ));
        }
        let k = self.knobs(e);
        let repeats = match &k.repeats {
            Some(v) => cx.positive(v, &at("repeats"), 100)? as u32,
            None => self.base.0,
        };
        let epochs = match &k.epochs {
            Some(v) => cx.positive(v, &at("epochs"), 1000)? as u32,
            None => self.base.1,
        };
        let x = ExperimentCx {
            cx,
            e,
            k: &k,
            index: i,
        };
        Ok(ExperimentPlan {
            id,
            title: e.title.clone(),
            repeats,
            epochs,
            spec: self.spec(&x)?,
        })
    }

    /// The experiment's knobs, with `[experiment.quick]` over them under
    /// `--quick`.
    fn knobs(&self, e: &RawExperiment) -> RawKnobs {
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
        if self.quick
            && let Some(q) = &e.quick
        {
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
        k
    }

    /// The spec of the experiment's kind.
    fn spec(&self, x: &ExperimentCx) -> Result<ExperimentSpec, SuiteError> {
        let e = x.e;
        x.check_model_keys()?;
        match e.kind.get_ref().as_str() {
            "compute" => x.compute(),
            "transfer" => x.transfer(),
            "batch_sweep" => x.batch_sweep(),
            "oom_probe" => x.oom_probe(),
            kind @ ("loader" | "stall") => self.loader_spec(x, kind),
            other => Err(self.cx.err(
                e.kind.span(),
                &x.at("kind"),
                format!(
                    "{other:?}; expected compute, transfer, batch_sweep, oom_probe, loader or stall"
                ),
            )),
        }
    }

    /// A loader or stall experiment: its model (`none` keeps only the
    /// data's shape), then its `[experiment.loader]` table.
    fn loader_spec(&self, x: &ExperimentCx, kind: &str) -> Result<ExperimentSpec, SuiteError> {
        let e = x.e;
        let none = e.model.as_ref().filter(|m| m.get_ref() == "none");
        if let (Some(m), "stall") = (none, kind) {
            return Err(self.cx.err(
                m.span(),
                &x.at("model"),
                "\"none\" in a stall experiment; the differential method needs a model to compute with (model = \"none\" belongs to kind = \"loader\")",
            ));
        }
        let python_model = x.python_model(kind)?;
        let (model, loader_only) = match (none, &python_model) {
            // The model's name only carries the data's shape.
            (Some(_), _) => match source::source_name(e.loader.as_ref()) {
                "images" => (x.model_named("image_cnn")?, true),
                "fashionmnist" => (x.model_named("fashion_cnn")?, true),
                _ => (x.model_named("linear")?, true),
            },
            // The harness builds the user's model; this one is unused.
            (None, Some(_)) => (x.model_named("linear")?, false),
            (None, None) => (x.model("linear")?, false),
        };
        let lx = loader_cx::LoaderCx {
            cx: self.cx,
            kind,
            index: x.index,
            kind_span: e.kind.span(),
            suite_dir: self.suite_dir,
            quick: self.quick,
        };
        loader::parse(&lx, e.loader.as_ref(), model, loader_only, python_model)
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
mod tests;
