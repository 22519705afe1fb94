//! A job bundle cannot contradict itself: every derived field of the
//! measured job fixtures (`fixtures/measured/*job*.json`), and of a format
//! 1.5 job bundle made from them (an A/A pair, its noise floor, limits, a
//! forecast, a crash and a configuration that would not fit), perturbed
//! one at a time, is rejected by `validate` with a problem at that field's
//! path; the unmodified bundles validate. The three edits of issue 30 and
//! the fuzzer's findings are each rejected with a located message.

use std::path::Path;

use serde_json::{Value, json};
use stallscope_bundle::analysis::{
    crash_failure, forecast, forecast_inputs, job_noise_floor, pair_ratios, tune_choice,
    verification_confirmed, would_not_fit,
};
use stallscope_bundle::*;

fn job_fixtures() -> Vec<(String, Bundle)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/measured");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.contains("job") && name.ends_with(".json") {
            let bundle = read_bundle(&std::fs::read(&path).unwrap())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            out.push((name, bundle));
        }
    }
    assert!(!out.is_empty(), "no fixtures/measured/*job*.json");
    out
}

/// Every problem `read_bundle` finds in `v` (none when it reads).
fn problems(v: &Value) -> Vec<Problem> {
    match read_bundle(&serde_json::to_vec(v).unwrap()) {
        Ok(_) => Vec::new(),
        Err(ReadError::Invalid(p)) => p,
        Err(other) => vec![Problem::new("$", other.to_string(), "")],
    }
}

/// `$.experiments[2].settings.x` as the JSON pointer `/experiments/2/settings/x`.
fn pointer(path: &str) -> String {
    path.trim_start_matches('$')
        .replace('[', ".")
        .replace(']', "")
        .replace('.', "/")
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// The configuration of the fixture's job with two workers.
fn two_workers(e: &Experiment) -> usize {
    e.configurations
        .iter()
        .position(|c| c.params.get("actual_num_workers") == Some(&ParamValue::Int(2)))
        .expect("a configuration with 2 workers")
}

/// `script` run again, `f[r]` times as fast in repeat r (the same CPU).
fn script_again(e: &Experiment) -> Configuration {
    let mut c = e.configuration("script").unwrap().clone();
    c.id = "script-again".into();
    c.label = "the script's own settings, again".into();
    for r in &mut c.runs {
        let f = [1.03, 0.985, 1.01][r.repeat as usize % 3];
        if let Some(w) = &r.whole_run {
            let (s, n, steps) = (w.seconds.unwrap(), w.samples.unwrap(), w.steps.unwrap());
            r.whole_run = Some(WholeRun::measured(s / f, n, steps, w.bytes.unwrap_or(0)));
        }
    }
    c
}

/// Peaks and the USS at the window's open in every window of `c`.
fn with_peaks(c: &mut Configuration) {
    for r in &mut c.runs {
        let Some(m) = r.memory.as_mut() else { continue };
        for p in &mut m.processes {
            p.peak_rss_bytes = p.rss_bytes.map(|x| x + 4 * KIB);
            if p.role == "worker" {
                p.uss_at_open_bytes = p.uss_bytes.map(|x| x - 2 * MIB);
            }
        }
        let main = m.processes.iter().find(|p| p.role == "main");
        m.host_peak_rss_bytes = main.and_then(|p| p.peak_rss_bytes);
        let workers = m.processes.iter().filter(|p| p.role == "worker");
        m.workers_peak_rss_bytes = workers.map(|p| p.peak_rss_bytes).sum();
    }
}

/// A failed configuration of the grid's knobs.
fn failed(id: &str, workers: i64, failure: Failure) -> Configuration {
    let mut c = Configuration::new(id, id)
        .with_param("num_workers", workers)
        .with_param("persistent_workers", true);
    c.failure = Some(failure);
    c
}

/// The fixture made a format 1.5 job bundle, its derived fields
/// recomputed by the library so that it validates.
fn format15(mut b: Bundle) -> Bundle {
    let limits = HostLimits {
        usable_cpus: 2,
        affinity_cpus: Some(2),
        cpu_quota_cores: Some(1.5),
        cpu_quota_source: Some("/sys/fs/cgroup/cpu.max".into()),
        memory_limit_bytes: Some(2 << 30),
        memory_limit_source: Some("/sys/fs/cgroup/memory.max".into()),
        shm_total_bytes: Some(64 * MIB),
        shm_free_bytes: Some(60 * MIB),
        sharing_strategy: Some("file_descriptor".into()),
        notes: Vec::new(),
    };
    let ji = b.experiments.iter().position(|e| e.id == "job").unwrap();
    let e = &mut b.experiments[ji];
    let again = script_again(e);
    e.configurations.insert(1, again);
    let w = two_workers(e);
    with_peaks(&mut e.configurations[w]);
    e.configurations[w].batch_bytes = Some(4352);
    let inputs = forecast_inputs(e, &e.configurations[w]).expect("inputs of the 2-worker window");
    e.configurations[w].forecast = Some(forecast(&inputs, Some(&limits)));
    let crash = "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error.";
    e.configurations
        .push(failed("w8", 8, crash_failure(crash, None, Some(1))));
    let big = ForecastInputs {
        workers: 16,
        batch_bytes: Some(25 * MIB),
        samples_in_window: 1600,
        ..inputs
    };
    let misfit = would_not_fit(&forecast(&big, Some(&limits))).expect("25 MiB × 33 misfits");
    e.configurations.push(failed("w16", 16, misfit));
    e.noise_floor = job_noise_floor(e);
    assert!(e.noise_floor.is_some());
    let choice = tune_choice(e, "script", &[]).unwrap();
    let set = |e: &mut Experiment, k: &str, v: ParamValue| e.settings.insert(k.into(), v);
    set(e, "tune_chosen", choice.chosen.id.as_str().into());
    set(e, "tune_fastest", choice.fastest.id.as_str().into());
    set(e, "tune_speedup", choice.speedup().into());
    let floor = e.noise_floor.clone();
    let v = b
        .experiments
        .iter_mut()
        .find(|e| e.id == "job-verify")
        .unwrap();
    let ratios = pair_ratios(v, "original", "recommended");
    set(
        v,
        "confirmed",
        verification_confirmed(&ratios, floor.as_ref()).into(),
    );
    b.environment.limits = Some(limits);
    b.schema_version = SchemaVersion::CURRENT;
    b
}

/// Each derived field of `b` present, with the path a problem must name
/// when it is perturbed (or one of several, split by `|`).
fn derived_fields(b: &Bundle) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut field = |p: String, at: String| out.push((p, at));
    for (i, e) in b.experiments.iter().enumerate() {
        let path = format!("$.experiments[{i}]");
        let keys: &[&str] = match e.id.as_str() {
            "job" => &["tune_chosen", "tune_fastest", "tune_speedup"],
            "job-verify" => &[
                "ratio_median",
                "ratio_min",
                "ratio_max",
                "pairs",
                "pair_order",
                "confirmed",
            ],
            "job-replay" => &[],
            _ => continue,
        };
        for k in keys.iter().filter(|k| e.settings.contains_key(**k)) {
            let p = format!("{path}.settings.{k}");
            field(p.clone(), p);
        }
        if let Some(f) = &e.noise_floor {
            for k in ["rate_floor", "rate_ratios[0]", "cpu_ratios[1]"] {
                let at = format!("{path}.noise_floor.{}", k.split('[').next().unwrap());
                field(format!("{path}.noise_floor.{k}"), at);
            }
            if f.cpu_floor.is_some() {
                let p = format!("{path}.noise_floor.cpu_floor");
                field(p.clone(), p);
            }
        }
        for (j, c) in e.configurations.iter().enumerate() {
            let cpath = format!("{path}.configurations[{j}]");
            configuration_fields(c, &cpath, &mut field);
        }
    }
    out
}

fn configuration_fields(c: &Configuration, cpath: &str, field: &mut impl FnMut(String, String)) {
    let recorded = c
        .runs
        .iter()
        .position(|r| r.memory.as_ref().is_some_and(|m| !m.processes.is_empty()));
    if c.params.contains_key("actual_num_workers") && recorded.is_some() {
        let p = format!("{cpath}.params.actual_num_workers");
        field(p.clone(), p);
    }
    if let (Some(k), Some(f)) = (recorded, &c.forecast) {
        let fpath = format!("{cpath}.forecast");
        for k in ["shm_in_flight", "worker_epoch_end", "memory_epoch_end"] {
            field(format!("{fpath}.{k}.bytes"), format!("{fpath}.{k}"));
        }
        for k in ["worker_growth_per_sample_bytes", "fits", "inputs.workers"] {
            field(format!("{fpath}.{k}"), format!("{fpath}.{k}"));
        }
        assert!(f.fits.is_some());
        let mpath = format!("{cpath}.runs[{k}].memory");
        // A main peak raised contradicts the run's; lowered, its own RSS.
        let p = format!("{mpath}.processes[0].peak_rss_bytes");
        field(p.clone(), format!("{p}|{mpath}.host_peak_rss_bytes"));
        for k in ["host_peak_rss_bytes", "workers_peak_rss_bytes"] {
            field(format!("{mpath}.{k}"), format!("{mpath}.{k}"));
        }
    }
}

/// Edits of a value that make it wrong whatever it was.
fn perturbations(v: &Value) -> Vec<Value> {
    match v {
        Value::Bool(b) => vec![json!(!b), json!("yes")],
        Value::Number(n) if n.is_u64() || n.is_i64() => {
            let x = n.as_i64().unwrap_or(i64::MAX / 4);
            vec![json!(x / 2 - 1), json!(x + 7), json!("yes")]
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap();
            vec![
                json!(x * 0.6),
                json!(-3.0),
                json!(x * 1.001 + 1e-3),
                json!("yes"),
            ]
        }
        Value::String(s) => vec![
            json!(format!("{s}\nsecond line")),
            json!("num_workers=1-persistent_workers=true"),
            json!(true),
        ],
        other => panic!("no perturbation of {other}"),
    }
}

fn check_every_perturbation(name: &str, b: &Bundle) {
    let base = serde_json::to_value(b).unwrap();
    assert_eq!(problems(&base), vec![], "{name} must validate as it is");
    let fields = derived_fields(b);
    assert!(
        fields.len() >= 10,
        "{name}: only {} derived fields",
        fields.len()
    );
    for (path, at) in fields {
        let original = base
            .pointer(&pointer(&path))
            .unwrap_or_else(|| panic!("{name}: no {path}"));
        for edit in perturbations(original) {
            if &edit == original {
                continue;
            }
            let mut v = base.clone();
            *v.pointer_mut(&pointer(&path)).unwrap() = edit.clone();
            let found = problems(&v);
            assert!(
                found
                    .iter()
                    .any(|p| p.path == path || at.split('|').any(|a| p.path == a)),
                "{name}: {path} set to {edit} was not rejected at {at}; problems: {found:#?}"
            );
        }
    }
}

#[test]
fn every_derived_field_perturbed_is_rejected_at_its_path() {
    for (name, b) in job_fixtures() {
        check_every_perturbation(&name, &b);
        check_every_perturbation(&format!("{name} as format 1.5"), &format15(b));
    }
}

/// The one problem an edit of the fixture at `path` makes, located there.
fn rejected(edit: impl Fn(&mut Value), at: &str, says: &[&str]) {
    let (_, b) = job_fixtures().remove(0);
    let mut v = serde_json::to_value(&b).unwrap();
    edit(&mut v);
    let err = read_bundle(&serde_json::to_vec(&v).unwrap()).unwrap_err();
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "one paragraph: {msg}");
    let ReadError::Invalid(found) = err else {
        panic!("{msg}")
    };
    let here: Vec<String> = found
        .iter()
        .filter(|p| p.path == at)
        .map(|p| p.to_string())
        .collect();
    assert!(!here.is_empty(), "nothing at {at}: {found:#?}");
    let text = here.join(" ");
    for s in says {
        assert!(text.contains(s), "{text:?} lacks {s:?}");
    }
}

#[test]
fn the_three_edits_of_issue_30_are_rejected_where_they_are() {
    rejected(
        |v| v["experiments"][2]["settings"]["ratio_median"] = json!(0.6),
        "$.experiments[2].settings.ratio_median",
        &["found 0.6", "2.06876", "recomputed from the runs"],
    );
    rejected(
        |v| v["experiments"][0]["settings"]["tune_speedup"] = json!(-3),
        "$.experiments[0].settings.tune_speedup",
        &["found -3", "2.192728", "median whole-run samples/s"],
    );
    rejected(
        |v| v["experiments"][2]["settings"]["confirmed"] = json!("yes"),
        "$.experiments[2].settings.confirmed",
        &["found the string \"yes\"", "true or false"],
    );
}

#[test]
fn the_fuzzers_findings_are_rejected_where_they_are() {
    rejected(
        |v| v["experiments"][2]["settings"]["ratio_median"] = json!(2.5),
        "$.experiments[2].settings.ratio_median",
        &["outside its own pairs' range"],
    );
    rejected(
        |v| v["experiments"][0]["configurations"][2]["params"]["actual_num_workers"] = json!(7),
        "$.experiments[0].configurations[2].params.actual_num_workers",
        &["7, but the window of runs[0] recorded 2 worker processes"],
    );
    rejected(
        |v| {
            let p = &mut v["experiments"][0]["configurations"][2]["runs"][0]["memory"]["processes"];
            p[2]["worker_id"] = json!(0);
        },
        "$.experiments[0].configurations[2].runs[0].memory.processes[2].worker_id",
        &["worker 0 is recorded twice"],
    );
}

#[test]
fn a_crash_is_one_line_and_a_misfit_needs_more_than_there_is() {
    let (_, b) = job_fixtures().remove(0);
    let b = format15(b);
    let v = serde_json::to_value(&b).unwrap();
    let job = v["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .position(|e| e["id"] == "job")
        .unwrap();
    let configs = v["experiments"][job]["configurations"].as_array().unwrap();
    let at = |id: &str| configs.iter().position(|c| c["id"] == id).unwrap();
    let (crash, misfit) = (at("w8"), at("w16"));
    let edits: [(usize, &str, Value, &str); 4] = [
        (crash, "message", json!("two\nlines"), "one readable line"),
        (crash, "message", json!(" "), "the message is empty"),
        (crash, "signal", json!(99), "a signal number from 1 to 64"),
        (misfit, "needed_bytes", json!(1), "more than is available"),
    ];
    for (j, key, edit, says) in edits {
        let mut e = v.clone();
        e["experiments"][job]["configurations"][j]["failure"][key] = edit;
        let path = format!("$.experiments[{job}].configurations[{j}].failure.{key}");
        let found = problems(&e);
        let p = found.iter().find(|p| p.path == path);
        assert!(
            p.is_some_and(|p| p.to_string().contains(says)),
            "{path}: {found:#?}"
        );
    }
}

#[test]
fn a_change_is_stored_exactly_when_the_grid_picks_one_the_pairs_confirm() {
    rejected(
        |v| v["experiments"][0]["settings"]["tune_change"] = json!("none: keep your settings"),
        "$.experiments[0].settings.tune_change",
        &["picks a change", "confirms it"],
    );
    // Pairs that did not confirm it leave nothing to change.
    rejected(
        |v| {
            v["experiments"][2]["settings"]["confirmed"] = json!(false);
            let runs = &mut v["experiments"][2]["configurations"][1]["runs"];
            for r in runs.as_array_mut().unwrap() {
                let w = &mut r["whole_run"];
                let s = w["seconds"].as_f64().unwrap() * 4.0;
                let n = w["samples"].as_f64().unwrap();
                w["seconds"] = json!(s);
                w["samples_per_s"] = json!(n / s);
                w["step_s"] = json!(s / w["steps"].as_f64().unwrap());
            }
        },
        "$.experiments[0].settings.tune_change",
        &["does not confirm it"],
    );
}
