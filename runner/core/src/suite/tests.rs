//! The suite parser's tests: presets, located errors, and each kind's
//! knobs.

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

/// A suite of one experiment of `kind` on `model` whose loader table is `table`.
fn loader_table(model: &str, kind: &str, table: &str) -> String {
    format!(
        "[[experiment]]\nid = \"a\"\nkind = \"{kind}\"\nmodel = \"{model}\"\n[experiment.loader]\n{table}"
    )
}

/// Each suite is refused with a message that contains its expected text.
fn assert_refused(cases: &[(String, &str)]) {
    for (text, want) in cases {
        let e = err(text);
        assert!(e.contains(want), "{e}\n--- for\n{text}");
    }
}

#[test]
fn engines_and_sources_are_checked_where_they_are_written() {
    let loader = loader_table;
    assert_refused(&[
        (
            loader("linear", "loader", "engines = [\"native\", \"jax\"]\n"),
            "s.toml:6:11: experiment[0].loader.engines: \"jax\"; expected native, pytorch, spdl, dali, nodes",
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
            loader("none", "stall", ""),
            "s.toml:4:9: experiment[0].model: \"none\" in a stall experiment",
        ),
        (
            loader("linear", "stall", "engines = [\"pytorch\"]\n"),
            "s.toml:6:11: experiment[0].loader.engines: a stall experiment runs the differential method on the native engine",
        ),
    ]);
}

#[test]
fn peer_keys_are_checked_where_they_are_written() {
    let loader = loader_table;
    assert_refused(&[
        (
            loader("linear", "loader", "contexts = [\"fork\", \"spawn\"]\n"),
            "experiment[0].loader.contexts: the start method of DataLoader workers is a pytorch knob",
        ),
        (
            loader("linear", "loader", "factory = \"m:f\"\n"),
            "experiment[0].loader.factory: given with source = \"tensor\"",
        ),
        (
            loader("linear", "loader", "batched_fetch = [false, true]\n"),
            "s.toml:6:17: experiment[0].loader.batched_fetch: the DataLoader's batched fetch (__getitems__) is a pytorch knob",
        ),
        (
            loader(
                "linear",
                "loader",
                "source = \"python\"\nfactory = \"m:f\"\nbatched_fetch = [true]\n",
            ),
            "experiment[0].loader.batched_fetch: given with source = \"python\"; your own Dataset decides",
        ),
        (
            loader(
                "linear",
                "loader",
                "engines = [\"pytorch\"]\ndali_device = [\"cpu\"]\n",
            ),
            "experiment[0].loader.dali_device: where DALI decodes is a dali knob",
        ),
        (
            loader(
                "linear",
                "loader",
                "engines = [\"dali\"]\ndali_device = [\"mixed\"]\n",
            ),
            "experiment[0].loader.dali_device: \"mixed\" with source = \"tensor\"",
        ),
        (
            loader(
                "linear",
                "loader",
                "engines = [\"dali\"]\ndali_device = [\"gpu\"]\n",
            ),
            "experiment[0].loader.dali_device: \"gpu\"; expected cpu, mixed",
        ),
    ]);
}

#[test]
fn a_loader_only_table_runs_on_the_engines_it_names() {
    let loader = loader_table;
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
fn dali_and_nodes_sweep_their_own_knobs_only() {
    let text = "[[experiment]]\nid = \"a\"\nkind = \"loader\"\nmodel = \"image_cnn\"\n\
        [experiment.loader]\nsource = \"images\"\n\
        engines = [\"native\", \"pytorch\", \"spdl\", \"dali\", \"nodes\"]\n\
        workers = [0, 2]\nworker_kinds = [\"threads\", \"processes\"]\n\
        batched_fetch = [false, true]\ndali_device = [\"cpu\", \"mixed\"]\n";
    let plan = parse_suite(text, "s.toml", "s", None, false).unwrap();
    let ExperimentSpec::Loader(lp) = &plan.experiments[0].spec else {
        panic!("a loader plan")
    };
    let points = crate::grid::points(lp);
    let ids: Vec<String> = points.iter().map(|p| crate::grid::point_id(*p)).collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "ids are unique: {ids:?}");
    let of = |e: EngineName| points.iter().filter(move |p| p.engine == e);
    // DALI: no in-loop point; each thread count crossed with both placements.
    assert_eq!(of(EngineName::Dali).count(), 2);
    assert!(of(EngineName::Dali).all(|p| p.workers > 0));
    // nodes: in loop, and 2 workers of each kind.
    assert_eq!(of(EngineName::Nodes).count(), 3);
    // pytorch: both fetches at 0 and 2 workers; nobody else batches.
    assert_eq!(of(EngineName::Pytorch).filter(|p| p.batched).count(), 2);
    assert!(
        points
            .iter()
            .all(|p| !p.batched || p.engine == EngineName::Pytorch)
    );
    for p in &points {
        let c = crate::grid::configuration(lp, *p, None, None, false);
        let na = |k: &str| c.not_applicable.contains_key(k);
        let mixed = p.dali_device == DaliDevice::Mixed;
        assert_eq!(
            na("dali_device"),
            p.engine != EngineName::Dali || mixed,
            "{}",
            c.id
        );
        assert_eq!(
            na("batched_fetch"),
            p.engine != EngineName::Pytorch,
            "{}",
            c.id
        );
        let on_gpu = crate::grid::configuration(lp, *p, None, None, true);
        assert!(!on_gpu.not_applicable.contains_key("dali_device") || p.engine != EngineName::Dali);
        assert_eq!(on_gpu.cannot_run_here(), None, "{}", c.id);
    }
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
        e.starts_with("s.toml:1:17: torch_threads: 0 is out of range; expected an integer from 1"),
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

/// A loader experiment on the user's own model (`model = "python"`).
fn user_model_suite(experiment: &str, loader: &str) -> String {
    format!(
        "[[experiment]]\nid = \"a\"\nkind = \"loader\"\n{experiment}\n[experiment.loader]\n{loader}\n"
    )
}

#[test]
fn a_python_model_is_read_with_its_factory_and_arguments() {
    let text = user_model_suite(
        "model = \"python\"\nmodel_factory = \"pkg.my_model:make\"\nmodel_args = { features = 64, hidden = [32, 16] }",
        "source = \"python\"\nfactory = \"my_dataset:make_dataset\"\nworkers = [0, 2]",
    );
    let plan = parse_suite(&text, "s.toml", "s", Some(Path::new("/x/s.toml")), false).unwrap();
    let ExperimentSpec::Loader(lp) = &plan.experiments[0].spec else {
        panic!("a loader plan")
    };
    let m = lp.python_model.as_ref().expect("the user's model");
    assert_eq!(m.factory, "pkg.my_model:make");
    assert_eq!(m.args["features"], serde_json::json!(64));
    assert_eq!(m.args["hidden"], serde_json::json!([32, 16]));
    assert!(!lp.loader_only);
    assert_eq!(lp.engines, [EngineName::Pytorch]);
    assert!(matches!(lp.data, DataPlan::Python { .. }));
    // Without model_args the factory is called with none.
    let text = user_model_suite(
        "model = \"python\"\nmodel_factory = \"m:f\"",
        "source = \"python\"\nfactory = \"d:f\"\nengines = [\"pytorch\"]",
    );
    let plan = parse_suite(&text, "s.toml", "s", None, false).unwrap();
    let ExperimentSpec::Loader(lp) = &plan.experiments[0].spec else {
        panic!("a loader plan")
    };
    assert!(lp.python_model.as_ref().unwrap().args.is_empty());
    // Every other model has none.
    let text = user_model_suite("model = \"linear\"", "source = \"tensor\"");
    let plan = parse_suite(&text, "s.toml", "s", None, false).unwrap();
    let ExperimentSpec::Loader(lp) = &plan.experiments[0].spec else {
        panic!("a loader plan")
    };
    assert!(lp.python_model.is_none());
}

#[test]
fn a_python_model_is_refused_where_it_cannot_run_with_the_key_at_fault() {
    let py = "source = \"python\"\nfactory = \"d:f\"";
    for (text, want) in [
        (
            user_model_suite("model = \"python\"", py),
            "s.toml:4:9: experiment[0].model_factory: missing; model = \"python\" needs model_factory = \"module:function\"",
        ),
        (
            user_model_suite("model = \"python\"\nmodel_factory = \"nocolon\"", py),
            "s.toml:5:17: experiment[0].model_factory: \"nocolon\"; expected \"module:function\"",
        ),
        (
            user_model_suite(
                "model = \"python\"\nmodel_factory = \"m:f\"",
                "source = \"tensor\"",
            ),
            "s.toml:4:9: experiment[0].model: \"python\" with source = \"tensor\"; your own model runs in the Python harness on your own Dataset: expected source = \"python\"",
        ),
        (
            user_model_suite(
                "model = \"python\"\nmodel_factory = \"m:f\"",
                "source = \"python\"\nfactory = \"d:f\"\nengines = [\"native\", \"pytorch\"]",
            ),
            "s.toml:9:11: experiment[0].loader.engines: model = \"python\" trains your own model on your own Dataset in the Python harness (the native engine cannot run a Python model); expected engines = [\"pytorch\"]",
        ),
        (
            user_model_suite(
                "model = \"python\"\nmodel_factory = \"m:f\"\nfeatures = 64",
                py,
            ),
            "s.toml:6:12: experiment[0].features: given with model = \"python\"; your factory builds the model",
        ),
        (
            user_model_suite("model = \"linear\"\nmodel_factory = \"m:f\"", py),
            "s.toml:5:17: experiment[0].model_factory: given with model = \"linear\"; it belongs to model = \"python\"",
        ),
        (
            user_model_suite("model_args = { a = 1 }", py),
            "s.toml:4:14: experiment[0].model_args: given with no model; it belongs to model = \"python\"",
        ),
        (
            user_model_suite("model = \"python\"\nmodel_factory = \"m:f\"", py)
                .replace("kind = \"loader\"", "kind = \"stall\""),
            "s.toml:4:9: experiment[0].model: \"python\" in a stall experiment; the differential method runs on the native engine",
        ),
        (
            "[[experiment]]\nid = \"a\"\nkind = \"compute\"\nmodel = \"python\"\n".to_string(),
            "s.toml:4:9: experiment[0].model: \"python\"; expected fashion_cnn, linear or image_cnn (or none or python, for kind = \"loader\")",
        ),
    ] {
        let e = err(&text);
        assert!(e.starts_with(want), "{e}\n  expected: {want}");
    }
}

#[test]
fn the_user_model_example_parses() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/user_dataset/my_model.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let plan = parse_suite(&text, "my_model.toml", "my_model", Some(&path), false).unwrap();
    let ExperimentSpec::Loader(lp) = &plan.experiments[0].spec else {
        panic!("a loader plan")
    };
    assert_eq!(
        lp.python_model.as_ref().map(|m| m.factory.as_str()),
        Some("my_model:make_model")
    );
    assert_eq!(lp.workers, [0, 2]);
    // The model factory is imported from the Dataset's folder.
    let DataPlan::Python { path: folder, .. } = &lp.data else {
        panic!("a python source")
    };
    assert!(folder.join("my_model.py").exists(), "{}", folder.display());
}
