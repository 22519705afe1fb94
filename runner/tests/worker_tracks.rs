//! Worker tracks through the real `stallscope run` (real libtorch on the
//! CPU, real worker threads and processes) and `stallscope trace`: only
//! diagnostic runs keep them, and the trace of one opens with a track per
//! worker, each with its batches' slices, every batch of the epoch on
//! exactly one worker's track and tied to the step that took it.

// Shared with the runner's end-to-end tests; not every helper is used here.
#[allow(dead_code)]
mod util;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use stallscope_bundle::TimingMode;
use util::*;

const SUITE: &str = r#"
title = "worker tracks"
seed = 7
repeats = 1
epochs = 2

[[experiment]]
id = "loader"
kind = "loader"
model = "linear"
features = 16
classes = 4

[experiment.loader]
source = "tensor"
samples = 512
batch_size = 64
workers = [2]
worker_kinds = ["threads", "processes"]
pinned = [false]
"#;

/// Batches in the epoch: 512 samples in batches of 64.
const BATCHES: u64 = 8;

fn trace(bundle: &Path, run: &str, out: &Path) -> Value {
    let o = util::run(
        &[
            "trace",
            bundle.to_str().unwrap(),
            "--run",
            run,
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

/// The trace's tracks by name: tid → name.
fn track_names(events: &[Value]) -> BTreeMap<u64, String> {
    events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// A trace of a 2-worker run has a track per worker, each with slices, and
/// every batch on exactly one of them, each tied to its step.
fn check_trace(t: &Value, kind: &str) {
    let events = t["traceEvents"].as_array().unwrap();
    let names = track_names(events);
    let workers: Vec<(u64, &String)> = names
        .iter()
        .filter(|(_, n)| n.starts_with("worker "))
        .map(|(t, n)| (*t, n))
        .collect();
    let want: Vec<String> = (0..2).map(|w| format!("worker {w} ({kind})")).collect();
    assert_eq!(
        workers.iter().map(|w| w.1.clone()).collect::<Vec<_>>(),
        want,
        "{names:?}"
    );
    let mut on_track: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (tid, _) in &workers {
        let slices = events.iter().filter(|e| e["ph"] == "X" && e["tid"] == *tid);
        let batches: Vec<u64> = slices
            .filter(|e| e["cat"] == "batch")
            .map(|e| e["args"]["batch"].as_u64().unwrap())
            .collect();
        assert!(!batches.is_empty(), "worker track {tid} has batch slices");
        let samples = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["tid"] == *tid && e["cat"] == "sample")
            .count();
        assert_eq!(
            samples as u64,
            batches.len() as u64 * 64,
            "track {tid}: every sample"
        );
        for b in batches {
            on_track.entry(b).or_default().push(*tid);
        }
    }
    assert_eq!(
        on_track.len() as u64,
        BATCHES,
        "every batch of the epoch: {on_track:?}"
    );
    assert!(
        on_track.values().all(|t| t.len() == 1),
        "each on one track: {on_track:?}"
    );
    // Each step's next-wait names the batch it waited for and its worker,
    // and a flow arrow runs from that batch to it.
    let waits: Vec<&Value> = events.iter().filter(|e| e["name"] == "next_wait").collect();
    assert_eq!(waits.len() as u64, BATCHES);
    for (step, w) in waits.iter().enumerate() {
        let batch = w["args"]["batch"].as_u64().unwrap();
        assert_eq!(batch, step as u64, "in-order delivery");
        let worker = w["args"]["worker"].as_u64().unwrap();
        assert_eq!(on_track[&batch], vec![100 + worker]);
        assert_eq!(w["args"]["samples"].as_array().unwrap().len(), 64);
    }
    let flows = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count() as u64;
    assert_eq!((flows("s"), flows("f")), (BATCHES, BATCHES));
    if kind == "process" {
        assert!(names.values().any(|n| n == "handover (consumer thread)"));
    }
}

#[test]
fn a_diagnostic_run_traces_each_batch_to_its_worker_and_samples() {
    let dir = temp_dir("worker-tracks");
    let suite = write_suite(dir.path(), "tracks.toml", SUITE);
    let out = dir.path().join("out");
    let o = run_on_cpu(&suite, &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let bundle_path = out.join("bundle.json");
    let bundle = valid_bundle(&bundle_path);
    let e = bundle.experiment("loader").unwrap();
    assert_eq!(e.configurations.len(), 2);
    for c in &e.configurations {
        let kind = if c.id.contains("processes") {
            "process"
        } else {
            "thread"
        };
        for r in &c.runs {
            let diagnostic = r.timing_mode == TimingMode::Diagnostic;
            assert_eq!(r.worker_tracks.is_some(), diagnostic, "{}/{}", c.id, r.id);
        }
        for epoch in ["diagnostic-r0-e0", "diagnostic-r0-e1"] {
            let run = format!("loader/{}/{epoch}", c.id);
            let t = trace(&bundle_path, &run, &dir.path().join("trace.json"));
            check_trace(&t, kind);
        }
    }
}
