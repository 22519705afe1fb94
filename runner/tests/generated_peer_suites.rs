//! The peers' invariant over generated suites: every loader suite that
//! `run` accepts, across any mix of engines (native, pytorch, spdl, dali,
//! nodes) and knobs (workers, worker kinds, start methods, prefetch,
//! persistence, pinning, batched fetch, shuffle, drop_last, model or none),
//! yields a valid bundle in which no configuration failed, and every engine
//! took the same number of samples and steps in every epoch (the same
//! batches). Real harness, real PyTorch, SPDL, DALI and torchdata; `STALLSCOPE_PEER_SUITES=N` sets how many (default 6),
//! `STALLSCOPE_SUITE_SEED=S` the first seed, `STALLSCOPE_PEERS=0` skips.

#[allow(dead_code)]
mod util;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use stallscope_bundle::TimingMode;
use stallscope_loader::Rng;
use util::*;

fn suite(seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut out = String::new();
    let source = *pick(&mut rng, &["tensor", "tensor", "synthetic", "images"]);
    let model = match (source, rng.coin()) {
        (_, true) => "none",
        ("images", false) => "image_cnn",
        _ => "linear",
    };
    writeln!(
        out,
        "title = \"generated peers {seed}\"\nseed = {}\ntorch_threads = 1\nrepeats = 1\nepochs = {}",
        seed % 5,
        1 + rng.below(2)
    )
    .unwrap();
    writeln!(
        out,
        "[[experiment]]\nid = \"g\"\nkind = \"loader\"\nmodel = \"{model}\"\nfeatures = 8\nclasses = 3\nimage_size = 16"
    )
    .unwrap();
    let samples = *pick(&mut rng, &[5, 16, 33, 48]);
    let batch = *pick(&mut rng, &[4, 16, 32]);
    writeln!(
        out,
        "[experiment.loader]\nsource = \"{source}\"\nsamples = {samples}\nbatch_size = {batch}"
    )
    .unwrap();
    match source {
        "synthetic" => writeln!(out, "latency_ms = 0.1\ncpu_work_rounds = 5").unwrap(),
        "images" => writeln!(
            out,
            "image_width = 24\nimage_height = 20\nresize = 18\nflip = {}\nrandom_crop = {}",
            rng.coin(),
            rng.coin()
        )
        .unwrap(),
        _ => {}
    }
    // At least one peer beside any others.
    let mut engines = subset(
        &mut rng,
        &[
            "\"native\"",
            "\"pytorch\"",
            "\"spdl\"",
            "\"dali\"",
            "\"nodes\"",
        ],
    );
    if engines == "[\"native\"]" {
        engines = "[\"native\", \"pytorch\"]".into();
    }
    writeln!(out, "engines = {engines}").unwrap();
    writeln!(out, "workers = {}", subset(&mut rng, &[0, 1, 2])).unwrap();
    // spawn and forkserver start slowly: one suite in four tries them.
    let contexts = if rng.below(4) == 0 {
        subset(&mut rng, &["\"fork\"", "\"spawn\"", "\"forkserver\""])
    } else {
        "[\"fork\"]".into()
    };
    if engines.contains("pytorch") {
        writeln!(out, "contexts = {contexts}").unwrap();
    }
    if rng.coin() {
        let kinds = subset(&mut rng, &["\"threads\"", "\"processes\""]);
        writeln!(out, "worker_kinds = {kinds}").unwrap();
    }
    if engines.contains("pytorch") && rng.below(3) == 0 {
        writeln!(out, "batched_fetch = {}", subset(&mut rng, &[false, true])).unwrap();
    }
    writeln!(out, "prefetch = {}", subset(&mut rng, &[1, 2])).unwrap();
    writeln!(out, "persistent = {}", subset(&mut rng, &[false, true])).unwrap();
    writeln!(out, "pinned = {}", subset(&mut rng, &[false, true])).unwrap();
    for key in ["shuffle", "drop_last"] {
        if rng.coin() {
            writeln!(out, "{key} = {}", rng.coin()).unwrap();
        }
    }
    out
}

#[test]
fn every_accepted_peer_suite_runs_the_same_batches_on_every_engine() {
    if std::env::var("STALLSCOPE_PEERS").as_deref() == Ok("0") {
        eprintln!("SKIPPED: STALLSCOPE_PEERS=0; generated peer suites were not run");
        return;
    }
    let n: u64 = std::env::var("STALLSCOPE_PEER_SUITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let first: u64 = std::env::var("STALLSCOPE_SUITE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let harness = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../python")
        .display()
        .to_string();
    let (mut accepted, mut refused) = (0, 0);
    for seed in first..first + n {
        let text = suite(seed);
        let dir = temp_dir("peer-suite");
        let path = write_suite(dir.path(), "g.toml", &text);
        let out = dir.path().join("out");
        let o = run_on_cpu(&path, &out, &[("STALLSCOPE_HARNESS_DIR", harness.as_str())]);
        if o.status.code() == Some(2) {
            // Refused with a located message (e.g. drop_last leaving no batch).
            assert!(
                String::from_utf8_lossy(&o.stderr).contains("g.toml:"),
                "seed {seed}: refused without a location\n{text}\n{}",
                text_of(&o)
            );
            refused += 1;
            continue;
        }
        accepted += 1;
        assert!(o.status.success(), "seed {seed}\n{text}\n{}", text_of(&o));
        let b = valid_bundle(&out.join("bundle.json"));
        // (mode, repeat, epoch) -> the (samples, steps) every engine took.
        let mut took: BTreeMap<(String, u32, u32), (u64, u64, String)> = BTreeMap::new();
        for c in &b.experiments[0].configurations {
            assert!(
                c.failure.is_none(),
                "seed {seed}: {}: {:?}\n{text}",
                c.id,
                c.failure
            );
            assert!(!c.runs.is_empty(), "seed {seed}: {} has no runs", c.id);
            for r in &c.runs {
                let (samples, steps) = match r.timing_mode {
                    TimingMode::WholeRun => {
                        let w = r.whole_run.as_ref().unwrap();
                        (w.samples.unwrap(), w.steps.unwrap())
                    }
                    _ => {
                        let d = r.diagnostic.as_ref().unwrap();
                        (d.samples.unwrap(), d.steps.unwrap())
                    }
                };
                let key = (r.timing_mode.as_str().to_string(), r.repeat, r.epoch);
                let seen = took.entry(key).or_insert((samples, steps, c.id.clone()));
                assert_eq!(
                    (seen.0, seen.1),
                    (samples, steps),
                    "seed {seed}: {} took {samples} samples in {steps} steps; {} took {} in {}\n{text}",
                    c.id,
                    seen.2,
                    seen.0,
                    seen.1
                );
            }
        }
    }
    eprintln!("generated peer suites: {accepted} accepted, {refused} refused");
    assert!(
        accepted * 2 >= n,
        "too few suites accepted: {accepted} of {n}"
    );
}

fn text_of(o: &std::process::Output) -> String {
    text(o)
}
