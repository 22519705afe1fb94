//! `stallscope validate` and `stallscope compare` on the fixtures, through the
//! real binary: messages, exit codes, and the regression gate both ways.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// A fresh temporary folder, removed when the test ends.
fn temp_dir(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("stallscope-{name}-"))
        .tempdir()
        .expect("a temporary folder")
}

fn stallscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(args)
        .current_dir(fixtures())
        .output()
        .expect("run stallscope")
}

const MEASURED: &str = "measured/cpu-quickstart-quick.json";

/// A temp folder holding `before.json` (the measured fixture) and
/// `after.json`, in which batch_sweep/bs64's whole-run epochs took 1.25× as
/// long: a synthetic regression made here, never a fixture.
fn before_and_after(tag: &str) -> TempDir {
    let tmp = temp_dir(&format!("cmp-{tag}"));
    let dir = tmp.path();
    let text = std::fs::read_to_string(fixtures().join(MEASURED)).unwrap();
    std::fs::write(dir.join("before.json"), &text).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for e in v["experiments"].as_array_mut().unwrap() {
        if e["id"] != "batch_sweep" {
            continue;
        }
        for c in e["configurations"].as_array_mut().unwrap() {
            if c["id"] != "bs64" {
                continue;
            }
            for r in c["runs"].as_array_mut().unwrap() {
                let w = &mut r["whole_run"];
                if w.is_null() {
                    continue;
                }
                let seconds = w["seconds"].as_f64().unwrap() * 1.25;
                let samples = w["samples"].as_f64().unwrap();
                w["seconds"] = seconds.into();
                w["samples_per_s"] = (samples / seconds).into();
                if let Some(step) = w.get("step_s").and_then(|x| x.as_f64()) {
                    w["step_s"] = (step * 1.25).into();
                }
            }
        }
    }
    std::fs::write(dir.join("after.json"), serde_json::to_string(&v).unwrap()).unwrap();
    tmp
}

/// `stallscope compare before.json after.json --threshold T` on the pair
/// made by [`before_and_after`]; the output and its text.
fn compare_before_after(tag: &str, threshold: &str) -> (Output, String, String) {
    let tmp = before_and_after(tag);
    let dir = tmp.path();
    let o = stallscope(&[
        "compare",
        dir.join("before.json").to_str().unwrap(),
        dir.join("after.json").to_str().unwrap(),
        "--threshold",
        threshold,
    ]);
    let (out, err) = text(&o);
    (o, out, err)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn validate_accepts_the_published_and_measured_fixtures() {
    let o = stallscope(&[
        "validate",
        "published/fashionmnist-batch-sweep.json",
        MEASURED,
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(
        out.contains(
            "published/fashionmnist-batch-sweep.json: valid — format 1.0, published, 3 experiments"
        ),
        "{out}"
    );
}

#[test]
fn validate_reports_every_bad_file_with_its_name_and_exits_1() {
    let mut args = vec!["validate".to_string()];
    let mut names = Vec::new();
    for entry in std::fs::read_dir(fixtures().join("bad")).unwrap() {
        let name = format!("bad/{}", entry.unwrap().file_name().to_string_lossy());
        names.push(name.clone());
        args.push(name);
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = stallscope(&refs);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in &names {
        assert!(
            err.lines().any(|l| l.starts_with(&format!("{n}: "))),
            "no message for {n}:\n{err}"
        );
    }
    assert!(
        err.contains(&format!(
            "{} of {} bundle(s) invalid",
            names.len(),
            names.len()
        )),
        "{err}"
    );
    assert!(err.contains("bad/negative-seconds.json: at $.experiments[0].configurations[2].runs[0].whole_run.seconds: found -"), "{err}");
}

#[test]
fn validate_names_a_missing_file() {
    let o = stallscope(&["validate", "no/such/bundle.json"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("no/such/bundle.json: cannot read the file"),
        "{err}"
    );
}

#[test]
fn validate_refuses_a_50_megabyte_file_without_reading_it_whole() {
    let tmp = temp_dir("big");
    let big = tmp.path().join("big.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(50 * 1000 * 1000).unwrap();
    let o = stallscope(&["validate", big.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("big.json: the file is 50000000 bytes") && err.contains("at most"),
        "{err}"
    );
}

#[test]
fn compare_prints_the_side_by_side_table() {
    let (o, out, err) = compare_before_after("table", "30");
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("[ batch_sweep — "), "{out}");
    assert!(
        out.contains("BASE before") && out.contains("NEW after") && out.contains("NEW/BASE"),
        "{out}"
    );
    assert!(
        out.contains("0.80×"),
        "the slowed configuration shows its ratio: {out}"
    );
    assert!(
        out.contains("oom_probe") && out.contains("not applicable"),
        "{out}"
    );
}

#[test]
fn compare_exits_1_on_a_regression_beyond_the_threshold() {
    let (o, out, err) = compare_before_after("gate", "5");
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(out.contains("SLOWER (beyond 5%)"), "{out}");
    assert!(
        err.contains("1 configuration(s) slower") && err.contains("batch_sweep/bs64"),
        "{err}"
    );
}

#[test]
fn compare_formats() {
    for (fmt, needle) in [
        ("markdown", "| configuration | BASE"),
        ("csv", "experiment,configuration,metric"),
        ("json", "\"regressions\""),
    ] {
        let o = stallscope(&["compare", MEASURED, MEASURED, "--format", fmt]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{fmt}: {err}");
        assert!(out.contains(needle), "{fmt}: {out}");
    }
}

#[test]
fn compare_refuses_diagnostic_against_whole_run() {
    let before = std::fs::read_to_string(fixtures().join(MEASURED)).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&before).unwrap();
    for c in v["experiments"][0]["configurations"]
        .as_array_mut()
        .unwrap()
    {
        c["runs"]
            .as_array_mut()
            .unwrap()
            .retain(|r| r["timing_mode"] == "diagnostic");
    }
    let tmp = temp_dir("diag");
    let p = tmp.path().join("diagnostic-only.json");
    std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
    let o = stallscope(&["compare", MEASURED, p.to_str().unwrap()]);
    let (out, _) = text(&o);
    assert!(
        out.contains("refused: one side has only diagnostic figures"),
        "{out}"
    );
    assert!(
        out.contains("synchronizes at every stage boundary"),
        "{out}"
    );
}

#[test]
fn compare_published_against_measured_warns_about_the_machine() {
    let o = stallscope(&[
        "compare",
        "published/fashionmnist-batch-sweep.json",
        MEASURED,
        "--threshold",
        "100",
    ]);
    let (out, _) = text(&o);
    assert!(
        out.contains("WARNING: the two bundles differ in machine or settings"),
        "{out}"
    );
    assert!(out.contains("published: "), "{out}");
}

#[test]
fn compare_names_an_unreadable_bundle_and_exits_2() {
    let o = stallscope(&["compare", "bad/truncated.json", MEASURED]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.starts_with("bad/truncated.json: not valid JSON at line"),
        "{err}"
    );
}

/// Lines of `out` longer than 100 characters (not bytes: `µ`, `–`, `×`).
fn wider_than_100(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.chars().count() > 100).collect()
}

#[test]
fn report_prints_a_saved_bundle_within_100_columns() {
    for bundle in [
        MEASURED,
        "measured/wgpu-quick.json",
        "published/fashionmnist-batch-sweep.json",
        "published/pytorch-data-loading-tutorial.json",
        "measured/cpu-job-tune.json",
    ] {
        let o = stallscope(&["report", bundle]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{bundle}: {err}");
        assert!(wider_than_100(&out).is_empty(), "{bundle}:\n{out}");
        assert!(out.contains("whole-run, "), "{bundle}:\n{out}");
    }
    let o = stallscope(&["report", MEASURED]);
    let (out, _) = text(&o);
    for needle in [
        "[ loader — Loader workers on light in-memory data",
        "Fastest: workers 0",
        "wait share",
        "diagnostic, steady",
        "in loop (0 workers)",
        "--wide",
    ] {
        assert!(out.contains(needle), "{needle}:\n{out}");
    }
}

#[test]
fn report_wide_and_formats_give_the_full_table() {
    let o = stallscope(&["report", MEASURED, "--wide"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        !wider_than_100(&out).is_empty(),
        "the full table is wide:\n{out}"
    );
    for heading in [
        "samples/s (whole-run, steady)",
        "epoch (whole-run, cold) [ms]",
        "host peak RSS [MiB]",
        "prefetch estimate",
        "data readiness",
    ] {
        assert!(out.contains(heading), "{heading}:\n{out}");
    }
    for (fmt, needle) in [
        ("markdown", "| configuration |"),
        (
            "csv",
            "experiment,configuration,label,metric,timing_mode,phase,value",
        ),
        ("json", "\"experiments\""),
    ] {
        let o = stallscope(&["report", MEASURED, "--format", fmt]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{fmt}: {err}");
        assert!(out.contains(needle), "{fmt}: {out}");
    }
    let o = stallscope(&["report", MEASURED, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["experiments"].as_array().unwrap().len(), 5);
}

#[test]
fn report_names_an_unreadable_bundle_and_exits_2() {
    let o = stallscope(&["report", "no/such/bundle.json"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no/such/bundle.json: cannot read the file"),
        "{err}"
    );
    let o = stallscope(&["report", "bad/truncated.json"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("bad/truncated.json: "), "{err}");
}

#[test]
fn compare_fits_100_columns_unless_wide() {
    let published = "published/fashionmnist-batch-sweep.json";
    let o = stallscope(&["compare", published, MEASURED]);
    let (out, _) = text(&o);
    assert!(out.contains("NEW/BASE"), "{out}");
    assert!(wider_than_100(&out).is_empty(), "{out}");
    let o = stallscope(&["compare", published, MEASURED, "--wide"]);
    let (out, _) = text(&o);
    assert!(!wider_than_100(&out).is_empty(), "{out}");
    assert!(out.contains("BASE fashionmnist-batch-sweep |"), "{out}");
}
