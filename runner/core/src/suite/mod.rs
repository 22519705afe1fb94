//! Suites: TOML files that list experiments, turned into a validated
//! [`Plan`] in layers — `raw` (the TOML types, with spans), `kinds` and
//! `loader` (a parser per experiment kind), `plan` (the validated types) and
//! `located` (the one helper for errors). Every error names the file, the
//! line and column, the key and what was expected. Presets are ordinary files
//! in `fixtures/suites/`, embedded in the binary.

mod kinds;
mod loader;
mod located;
mod plan;
mod ranks;
mod raw;

use std::path::{Path, PathBuf};

pub use located::SuiteError;
pub use plan::*;
pub use ranks::{DEFAULT_RANK_TIMEOUT_S, RankKnobs, SlowRank};

use kinds::ExperimentCx;
use located::{Located, key_at, line_col};
use raw::{RawKnobs, RawSuite};

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
    let rank_knobs = ranks::parse(&raw, &cx)?;
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
        let x = ExperimentCx {
            cx: &cx,
            e: &e,
            k: &k,
            index: i,
        };
        let spec = match e.kind.get_ref().as_str() {
            "compute" => x.compute()?,
            "transfer" => x.transfer()?,
            "batch_sweep" => x.batch_sweep()?,
            "oom_probe" => x.oom_probe()?,
            kind @ ("loader" | "stall") => {
                let none = e.model.as_ref().filter(|m| m.get_ref() == "none");
                if let (Some(m), "stall") = (none, kind) {
                    return Err(cx.err(
                        m.span(),
                        &at("model"),
                        "\"none\" in a stall experiment; the differential method needs a model to compute with (model = \"none\" belongs to kind = \"loader\")",
                    ));
                }
                let (model, loader_only) = match none {
                    // The model's name only carries the data's shape.
                    Some(_) => match loader::source_name(e.loader.as_ref()) {
                        "images" => (x.model_named("image_cnn")?, true),
                        "fashionmnist" => (x.model_named("fashion_cnn")?, true),
                        _ => (x.model_named("linear")?, true),
                    },
                    None => (x.model("linear")?, false),
                };
                let suite_dir = path
                    .and_then(Path::parent)
                    .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
                loader::parse(
                    kind,
                    e.loader.as_ref(),
                    model,
                    loader_only,
                    &suite_dir,
                    quick,
                    &cx,
                    i,
                    e.kind.span(),
                )?
            }
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
        ranks: rank_knobs,
        experiments,
    })
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
    fn the_gpu_checks_suite_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gpu-peers.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        parse_suite(&text, "gpu-peers.toml", "gpu-peers", Some(&path), false).unwrap();
    }

    #[test]
    fn every_file_in_fixtures_suites_is_an_embedded_preset() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/suites");
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

    #[test]
    fn peer_keys_are_checked_where_they_are_written() {
        let loader = |model: &str, kind: &str, table: &str| {
            format!(
                "[[experiment]]\nid = \"a\"\nkind = \"{kind}\"\nmodel = \"{model}\"\n[experiment.loader]\n{table}"
            )
        };
        for (text, want) in [
            (
                loader("linear", "loader", "engines = [\"native\", \"jax\"]\n"),
                "s.toml:6:11: experiment[0].loader.engines: \"jax\"; expected native, pytorch, spdl",
            ),
            (
                loader("linear", "loader", "engines = [\"spdl\", \"spdl\"]\n"),
                "experiment[0].loader.engines: \"spdl\" twice",
            ),
            (
                loader("linear", "loader", "source = \"python\"\n"),
                "s.toml:6:10: experiment[0].loader.factory: missing",
            ),
            (
                loader(
                    "linear",
                    "loader",
                    "source = \"python\"\nfactory = \"a.b\"\n",
                ),
                "experiment[0].loader.factory: \"a.b\"; expected \"module:function\"",
            ),
            (
                loader(
                    "linear",
                    "loader",
                    "source = \"python\"\nfactory = \"m:f\"\nengines = [\"native\"]\n",
                ),
                "experiment[0].loader.engines: source = \"python\" runs your own Dataset",
            ),
            (
                loader("linear", "loader", "contexts = [\"fork\", \"spawn\"]\n"),
                "experiment[0].loader.contexts: the start method of DataLoader workers is a pytorch knob",
            ),
            (
                loader("none", "stall", ""),
                "s.toml:4:9: experiment[0].model: \"none\" in a stall experiment",
            ),
            (
                loader("linear", "stall", "engines = [\"pytorch\"]\n"),
                "s.toml:6:11: experiment[0].loader.engines: a stall experiment runs the differential method on the native engine",
            ),
            (
                loader("linear", "loader", "factory = \"m:f\"\n"),
                "experiment[0].loader.factory: given with source = \"tensor\"",
            ),
        ] {
            let e = err(&text);
            assert!(e.contains(want), "{e}\n--- for\n{text}");
        }
        let ok = loader(
            "none",
            "loader",
            "source = \"fashionmnist\"\nengines = [\"native\", \"pytorch\", \"spdl\"]\n",
        );
        let plan = parse_suite(&ok, "s.toml", "s", None, false).unwrap();
        let ExperimentSpec::Loader(lp) = &plan.experiments[0].spec else {
            panic!("a loader plan")
        };
        assert!(lp.loader_only && lp.model == crate::model_spec::ModelSpec::FashionCnn);
        assert_eq!(lp.engines.len(), 3);
    }

    #[test]
    fn auto_workers_and_the_image_decoder_keys() {
        let suite = |model: &str, source: &str, table: &str| {
            format!(
                "[[experiment]]\nid = \"a\"\nkind = \"loader\"\nmodel = \"{model}\"\n[experiment.loader]\nsource = \"{source}\"\n{table}"
            )
        };
        let cores = std::thread::available_parallelism().unwrap().get();
        for (model, kept) in [("none", 0), ("linear", 1)] {
            let text = suite(model, "tensor", "workers = [0, \"auto\", 1]\n");
            let plan = parse_suite(&text, "s.toml", "s", None, false).unwrap();
            let ExperimentSpec::Loader(lp) = &plan.experiments[0].spec else {
                panic!("a loader plan")
            };
            let auto = cores.saturating_sub(kept).max(1);
            let mut want = vec![0, auto];
            if auto != 1 {
                want.push(1);
            }
            assert_eq!(
                lp.workers, want,
                "{model}: a repeat of what auto came to is dropped"
            );
            let note = lp.workers_auto.as_deref().unwrap();
            assert!(
                note.starts_with(&format!(
                    "\"auto\" = {auto}: {cores} cores seen, {kept} kept"
                )),
                "{note}"
            );
        }
        for (text, want) in [
            (
                suite("linear", "tensor", "workers = [\"many\"]\n"),
                "experiment[0].loader.workers: \"many\"; expected integers from 0 to 256, or \"auto\"",
            ),
            (
                suite("linear", "tensor", "workers = [300]\n"),
                "experiment[0].loader.workers: 300 is out of range",
            ),
            (
                suite("image_cnn", "images", "decoder = \"libpng\"\n"),
                "s.toml:7:11: experiment[0].loader.decoder: \"libpng\"; expected \"auto\", \"libjpeg-turbo\" or \"zune-jpeg\"",
            ),
            (
                suite("linear", "tensor", "scaled_decode = false\n"),
                "experiment[0].loader.scaled_decode: given with source = \"tensor\"; it belongs to source = \"images\"",
            ),
        ] {
            let e = err(&text);
            assert!(e.contains(want), "{e}\n--- for\n{text}");
        }
        let text = suite(
            "image_cnn",
            "images",
            "decoder = \"zune-jpeg\"\nscaled_decode = false\n",
        );
        let plan = parse_suite(&text, "s.toml", "s", None, false).unwrap();
        let ExperimentSpec::Loader(lp) = &plan.experiments[0].spec else {
            panic!("a loader plan")
        };
        assert!(matches!(
            lp.data,
            DataPlan::Images {
                decoder: stallscope_loader::JpegDecoder::ZuneJpeg,
                scaled_decode: false,
                ..
            }
        ));
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
    fn an_epoch_without_a_batch_is_refused_where_the_batch_size_is() {
        let text = "[[experiment]]\nid = \"a\"\nkind = \"loader\"\n[experiment.loader]\nsamples = 3\nbatch_size = 8\ndrop_last = true\n";
        let e = err(text);
        assert!(
            e.starts_with("s.toml:6:14: experiment[0].loader.batch_size: 8 with 3 samples and drop_last = true leaves no batch"),
            "{e}"
        );
        // Without drop_last the epoch holds one partial batch: accepted.
        parse_suite(
            &text.replace("drop_last = true", "drop_last = false"),
            "s",
            "s",
            None,
            false,
        )
        .unwrap();
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
