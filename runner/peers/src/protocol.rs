//! The harness protocol (docs/peers-protocol.md, version 1): the request the
//! runner writes and the JSON lines it accepts back, checked strictly so a
//! harness that drifts from the contract fails loudly, with the line.

use serde::{Deserialize, Serialize};
use stallscope_bundle::{Failure, LoaderStats, TimingMode, WorkerTracks};

/// The protocol version both sides speak.
pub const PROTOCOL: u32 = 1;

/// One unit's work, written to the harness's standard input.
#[derive(Debug, Clone, Serialize)]
pub struct Request {
    pub protocol: u32,
    pub engine: &'static str,
    pub device: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torch_threads: Option<i32>,
    pub weights_seed: u64,
    pub model: serde_json::Value,
    pub optimizer: serde_json::Value,
    pub source: serde_json::Value,
    pub loader: LoaderRequest,
    pub non_blocking: bool,
    pub epochs: u32,
    pub modes: Vec<&'static str>,
    /// Every epoch's batches of sample indices (absent for a python source).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batches: Option<Vec<Vec<Vec<u64>>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shuffle: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shuffle_seed: Option<u64>,
    pub augment_seed: u64,
    /// This rank's place and the runner's c10d store, when the run has
    /// several ranks: the harness trains with DDP on a process group built
    /// on that store (docs/peers-protocol.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dist: Option<DistRequest>,
}

/// The `dist` key of a request.
#[derive(Debug, Clone, Serialize)]
pub struct DistRequest {
    pub rank: u32,
    pub world_size: u32,
    pub master_addr: String,
    pub master_port: u16,
    /// Keys of this unit's process group, apart from every other unit's.
    pub prefix: String,
    pub timeout_s: f64,
}

/// The loader knobs of one configuration.
#[derive(Debug, Clone, Serialize)]
pub struct LoaderRequest {
    pub batch_size: usize,
    pub workers: usize,
    pub prefetch: usize,
    pub persistent: bool,
    pub pin_memory: bool,
    pub context: &'static str,
    pub drop_last: bool,
    pub concurrency: usize,
    pub spdl_workers: &'static str,
    pub prefetch_to_device: bool,
    /// The DataLoader fetches a batch through `__getitems__` (pytorch).
    pub batched_fetch: bool,
    /// Where DALI decodes: `cpu` or `mixed` (dali).
    pub dali_device: &'static str,
    /// torchdata.nodes' workers: `threads` or `processes` (nodes).
    pub worker_kind: &'static str,
}

/// The first line: who answers, and what it built.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub protocol: u32,
    pub engine: String,
    pub python: String,
    pub torch: String,
    pub torchvision: Option<String>,
    pub spdl: Option<String>,
    /// DALI's version (the `dali` engine only).
    #[serde(default)]
    pub dali: Option<String>,
    /// torchdata's version (the `nodes` engine only).
    #[serde(default)]
    pub torchdata: Option<String>,
    pub parameters: u64,
    pub samples: u64,
    pub sample_shape: Vec<u64>,
    pub batch_bytes: u64,
    /// What the harness built of a user's own model (`model.name =
    /// "python"` only).
    #[serde(default)]
    pub model: Option<HelloModel>,
}

/// The user's model as the harness built it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelloModel {
    /// The module's class, `MyNet`.
    pub class: String,
    /// The loss: `cross_entropy` (the default) or the factory's function.
    pub loss: String,
    /// The optimizer's class (`SGD` by default, else the factory's).
    pub optimizer: String,
    /// The learning rate of its first parameter group.
    pub lr: Option<f64>,
}

/// One timed epoch.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpochLine {
    pub mode: String,
    pub epoch: u32,
    pub seconds: f64,
    pub samples: u64,
    pub steps: u64,
    pub bytes: u64,
    pub host_peak_rss_bytes: Option<u64>,
    pub children_peak_rss_bytes: Option<u64>,
    #[serde(default)]
    pub iterator_creation_s: Option<f64>,
    #[serde(default)]
    pub next_wait_ns: Option<Vec<u64>>,
    #[serde(default)]
    pub transfer_ns: Option<Vec<u64>>,
    #[serde(default)]
    pub compute_ns: Option<Vec<u64>>,
    /// The gradient all-reduce per step (diagnostic epochs with `dist` only).
    #[serde(default)]
    pub comm_ns: Option<Vec<u64>>,
    #[serde(default)]
    pub loader: Option<LoaderStats>,
    /// The DataLoader's worker processes in a diagnostic epoch (the
    /// `pytorch` engine with workers): the bundle's worker tracks.
    #[serde(default)]
    pub worker_tracks: Option<WorkerTracks>,
    /// The epoch's own peaks (reset when it opened) per process, with PSS
    /// and USS at its end (docs/peers-protocol.md `memory`).
    #[serde(default)]
    pub memory: Option<EpochMemory>,
}

/// An epoch line's `memory`: the harness and each worker seen in it. Its
/// entries carry more keys than read here (`shared_bytes`, `source`,
/// `group`, `at_open`; `workers_peak_rss_bytes`, the epoch line's
/// `children_peak_rss_bytes`), so unknown ones are let through.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EpochMemory {
    pub main: ProcessPeak,
    #[serde(default)]
    pub workers: Vec<ProcessPeak>,
}

/// One process of an epoch's `memory`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ProcessPeak {
    #[serde(default)]
    pub worker_id: Option<u32>,
    #[serde(default)]
    pub peak_rss_bytes: Option<u64>,
    /// `window`, or why the peak is since the process started.
    #[serde(default)]
    pub peak_since: Option<String>,
    #[serde(default)]
    pub rss_bytes: Option<u64>,
    #[serde(default)]
    pub pss_bytes: Option<u64>,
    #[serde(default)]
    pub uss_bytes: Option<u64>,
    #[serde(default)]
    pub swap_bytes: Option<u64>,
    #[serde(default)]
    pub uss_open_bytes: Option<u64>,
    /// Why a figure is missing.
    #[serde(default)]
    pub why: Option<String>,
}

/// The harness's own report of a failure.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorLine {
    pub stage: String,
    pub message: String,
    /// The engine's package is not installed: which, and the command that
    /// installs it. Checked by the strict decode, not read yet: the runner
    /// records the line's message as the failure (and its probe,
    /// `engines.rs`, finds a missing package before a unit starts).
    #[serde(default)]
    #[allow(dead_code, reason = "checked by the strict decode, not read yet")]
    pub missing: Option<MissingPackage>,
    /// The request asks for what this engine cannot do (the configuration
    /// is not applicable, with the message as the reason). Checked by the
    /// strict decode, not read yet: the runner records the message.
    #[serde(default)]
    #[allow(dead_code, reason = "checked by the strict decode, not read yet")]
    pub not_applicable: Option<bool>,
}

/// An engine's package the harness's Python lacks.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "checked by the strict decode, not read yet")]
pub struct MissingPackage {
    pub package: String,
    pub version: String,
    pub module: String,
    pub install: String,
}

/// One line of the reply.
#[derive(Debug, Clone)]
pub enum Line {
    Hello(Hello),
    Epoch(Box<EpochLine>),
    Done,
    Error(ErrorLine),
}

/// A line the runner could not accept: where, what, and what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {found}; expected {expected}")]
pub struct ProtocolError {
    pub line: usize,
    pub found: String,
    pub expected: String,
}

/// At most 120 characters of a line, for messages.
fn excerpt(text: &str) -> String {
    let t: String = text.chars().take(120).collect();
    if t.len() < text.len() {
        format!("{t:?}…")
    } else {
        format!("{t:?}")
    }
}

/// Decode line `n` (1-based) of the reply.
pub fn decode(n: usize, text: &str) -> Result<Line, ProtocolError> {
    let err = |found: String, expected: &str| ProtocolError {
        line: n,
        found,
        expected: expected.into(),
    };
    let value: serde_json::Value =
        stallscope_python::parse_line("the harness", n, text).map_err(|e| {
            err(
                format!("{} is not JSON ({})", excerpt(text), e.cause),
                "one JSON object per line (docs/peers-protocol.md)",
            )
        })?;
    let serde_json::Value::Object(mut map) = value else {
        return Err(err(
            format!("{} is not an object", excerpt(text)),
            "one JSON object per line",
        ));
    };
    let kind = match map.remove("type") {
        Some(serde_json::Value::String(s)) => s,
        Some(other) => {
            return Err(err(
                format!("\"type\" is {other}"),
                "a string: hello, epoch, done or error",
            ));
        }
        None => return Err(err("no \"type\"".into(), "hello, epoch, done or error")),
    };
    let rest = serde_json::Value::Object(map);
    let fields = |e: serde_json::Error, what: &str| {
        err(
            format!("a {what} line that does not fit: {e}"),
            &format!("the {what} fields of docs/peers-protocol.md"),
        )
    };
    match kind.as_str() {
        "hello" => {
            let h: Hello = serde_json::from_value(rest).map_err(|e| fields(e, "hello"))?;
            if h.protocol != PROTOCOL {
                return Err(err(
                    format!("protocol {}", h.protocol),
                    &format!(
                        "protocol {PROTOCOL} (the harness and the runner are from different versions)"
                    ),
                ));
            }
            Ok(Line::Hello(h))
        }
        "epoch" => {
            let e: EpochLine = serde_json::from_value(rest).map_err(|e| fields(e, "epoch"))?;
            check_epoch(&e)
                .map_err(|m| err(m, "an epoch line as docs/peers-protocol.md describes"))?;
            Ok(Line::Epoch(Box::new(e)))
        }
        "done" => {
            // With `dist`, `weights` (a digest per mode) and nothing else.
            let weights_ok = |v: &serde_json::Value| {
                v.as_array()
                    .is_some_and(|a| a.iter().all(serde_json::Value::is_string))
            };
            let fits = rest
                .as_object()
                .is_some_and(|m| m.iter().all(|(k, v)| k == "weights" && weights_ok(v)));
            if !fits {
                return Err(err(
                    format!("done with fields {rest}"),
                    "{\"type\": \"done\"}, with ranks also \"weights\": [digest, ...]",
                ));
            }
            Ok(Line::Done)
        }
        "error" => Ok(Line::Error(
            serde_json::from_value(rest).map_err(|e| fields(e, "error"))?,
        )),
        other => Err(err(
            format!("type {other:?}"),
            "hello, epoch, done or error",
        )),
    }
}

/// The checks serde cannot make: finite times, series of one entry per step
/// in diagnostic epochs and none in whole-run ones.
fn check_epoch(e: &EpochLine) -> Result<(), String> {
    if !e.seconds.is_finite() || e.seconds < 0.0 {
        return Err(format!("seconds = {}", e.seconds));
    }
    let series = [
        ("next_wait_ns", &e.next_wait_ns),
        ("transfer_ns", &e.transfer_ns),
        ("compute_ns", &e.compute_ns),
    ];
    match e.mode.as_str() {
        "whole_run" => {
            if e.comm_ns.is_some() {
                return Err("comm_ns in a whole_run epoch (its loop times no stage)".into());
            }
            if let Some((name, _)) = series.iter().find(|(_, s)| s.is_some()) {
                return Err(format!(
                    "{name} in a whole_run epoch (its loop times no stage)"
                ));
            }
            if e.iterator_creation_s.is_some() {
                return Err("iterator_creation_s in a whole_run epoch".into());
            }
            if e.worker_tracks.is_some() {
                return Err(
                    "worker_tracks in a whole_run epoch (only diagnostic ones keep them)".into(),
                );
            }
        }
        "diagnostic" => {
            if let Some(c) = &e.comm_ns
                && c.len() as u64 != e.steps
            {
                return Err(format!(
                    "comm_ns has {} entries for {} steps",
                    c.len(),
                    e.steps
                ));
            }
            for (name, s) in series {
                match s {
                    None => return Err(format!("a diagnostic epoch without {name}")),
                    Some(v) if v.len() as u64 != e.steps => {
                        return Err(format!(
                            "{name} has {} entries for {} steps",
                            v.len(),
                            e.steps
                        ));
                    }
                    Some(_) => {}
                }
            }
            match e.iterator_creation_s {
                Some(s) if s.is_finite() && s >= 0.0 => {}
                other => return Err(format!("iterator_creation_s = {other:?}")),
            }
            if let Some(t) = &e.worker_tracks {
                check_tracks(t, e.steps)?;
            }
        }
        other => return Err(format!("mode {other:?} (expected whole_run or diagnostic)")),
    }
    Ok(())
}

/// A diagnostic epoch's worker tracks: one step row per step, every worker
/// below the count, each table's columns of one length (the bundle's
/// validation checks the rest).
fn check_tracks(t: &WorkerTracks, steps: u64) -> Result<(), String> {
    let s = &t.steps;
    if s.batch.len() as u64 != steps || s.delivered_ns.len() as u64 != steps {
        return Err(format!(
            "worker_tracks.steps has {} batches and {} delivery times for {steps} steps",
            s.batch.len(),
            s.delivered_ns.len()
        ));
    }
    let b = &t.batches;
    let rows = b.batch.len();
    let lens = [
        b.worker.len(),
        b.start_ns.len(),
        b.build_ns.len(),
        b.collate_ns.len(),
        b.samples.len(),
        b.first_sample.len(),
        b.sample_rows.len(),
    ];
    if lens.iter().any(|&n| n != rows) {
        return Err(format!(
            "worker_tracks.batches: columns of {lens:?} entries for {rows} batches"
        ));
    }
    if let Some(w) = b.worker.iter().find(|&&w| w >= t.workers) {
        return Err(format!(
            "worker_tracks: worker {w} of {} workers",
            t.workers
        ));
    }
    Ok(())
}

/// A timing mode as the protocol names it (`"whole_run"`, else diagnostic).
pub(crate) fn mode(m: &str) -> TimingMode {
    match m {
        "whole_run" => TimingMode::WholeRun,
        _ => TimingMode::Diagnostic,
    }
}

/// A unit's failure in words.
pub(crate) fn error(message: String) -> Failure {
    Failure::Error { message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_line_decodes_and_drift_is_refused() {
        let hello = r#"{"type":"hello","protocol":1,"engine":"pytorch","python":"3.11","torch":"2.11.0","torchvision":null,"spdl":null,"parameters":260,"samples":8,"sample_shape":[64],"batch_bytes":1056}"#;
        assert!(matches!(decode(1, hello), Ok(Line::Hello(h)) if h.parameters == 260));
        let user = hello.replace(
            "\"batch_bytes\":1056",
            r#""batch_bytes":1056,"model":{"class":"MyNet","loss":"cross_entropy","optimizer":"SGD","lr":0.01}"#,
        );
        assert!(
            matches!(decode(1, &user), Ok(Line::Hello(h)) if h.model.as_ref().is_some_and(|m| m.class == "MyNet"))
        );
        let wr = r#"{"type":"epoch","mode":"whole_run","epoch":0,"seconds":0.5,"samples":8,"steps":2,"bytes":100,"host_peak_rss_bytes":1,"children_peak_rss_bytes":null}"#;
        assert!(matches!(decode(2, wr), Ok(Line::Epoch(_))));
        let diag = r#"{"type":"epoch","mode":"diagnostic","epoch":0,"seconds":0.5,"samples":8,"steps":2,"bytes":100,"host_peak_rss_bytes":1,"children_peak_rss_bytes":null,"iterator_creation_s":0.01,"next_wait_ns":[1,2],"transfer_ns":[0,0],"compute_ns":[3,4]}"#;
        assert!(matches!(decode(3, diag), Ok(Line::Epoch(_))));
        assert!(matches!(decode(4, r#"{"type":"done"}"#), Ok(Line::Done)));
        // With ranks: a comm series of one entry per step, a weights digest per mode.
        let ranked = diag.replace("\"compute_ns\"", "\"comm_ns\":[5,6],\"compute_ns\"");
        assert!(matches!(decode(5, &ranked), Ok(Line::Epoch(e)) if e.comm_ns == Some(vec![5, 6])));
        let done = r#"{"type":"done","weights":["ab12","ab12"]}"#;
        assert!(matches!(decode(6, done), Ok(Line::Done)));
        for bad in [
            diag.replace("\"compute_ns\"", "\"comm_ns\":[5],\"compute_ns\""),
            wr.replace("\"bytes\"", "\"comm_ns\":[1,2],\"bytes\""),
            r#"{"type":"done","weights":[1]}"#.to_string(),
            r#"{"type":"done","weights":["a"],"x":1}"#.to_string(),
        ] {
            assert!(decode(7, &bad).is_err(), "{bad}");
        }
        // Drift: a renamed field, an extra field, a short series, a new type,
        // another protocol, text that is not JSON.
        let renamed = wr.replace("\"seconds\"", "\"secs\"");
        let extra = wr.replace("\"epoch\":0", "\"epoch\":0,\"speed\":1");
        let short = diag.replace("[3,4]", "[3]");
        let newer = hello.replace("\"protocol\":1", "\"protocol\":2");
        for (text, needle) in [
            (renamed.as_str(), "seconds"),
            (extra.as_str(), "speed"),
            (short.as_str(), "compute_ns has 1 entries for 2 steps"),
            (r#"{"type":"progress"}"#, "progress"),
            (newer.as_str(), "protocol 2"),
            ("Traceback (most recent call last):", "not JSON"),
        ] {
            let e = decode(7, text).unwrap_err();
            assert_eq!(e.line, 7);
            assert!(e.to_string().contains(needle), "{e}");
        }
    }

    /// The harness's `memory` (docs/peers-protocol.md): each process's own
    /// peak of the epoch, with the keys the runner does not read let through.
    #[test]
    fn an_epochs_memory_is_each_processs_peak() {
        let line = r#"{"type":"epoch","mode":"whole_run","epoch":1,"seconds":0.5,"samples":8,"steps":2,"bytes":100,"host_peak_rss_bytes":300,"children_peak_rss_bytes":70,"memory":{"main":{"pid":9,"rss_bytes":250,"pss_bytes":200,"uss_bytes":150,"shared_bytes":100,"swap_bytes":0,"source":"smaps_rollup","why":null,"peak_rss_bytes":300,"peak_since":"window"},"workers":[{"pid":10,"loader":0,"worker_id":0,"group":1,"at_open":false,"ended":true,"peak_since":"process start (inside the window)","peak_rss_bytes":70}],"workers_peak_rss_bytes":70}}"#;
        let Ok(Line::Epoch(e)) = decode(2, line) else {
            panic!("{:?}", decode(2, line));
        };
        let run = crate::epoch::to_run(&e, 0);
        let m = run.memory.unwrap();
        assert_eq!(
            (m.host_peak_rss_bytes, m.workers_peak_rss_bytes),
            (Some(300), Some(70))
        );
        let [main, worker] = m.processes.as_slice() else {
            panic!("{:?}", m.processes);
        };
        assert_eq!(
            (main.role.as_str(), main.peak_rss_bytes),
            ("main", Some(300))
        );
        assert_eq!(
            (main.pss_bytes, main.uss_bytes, main.note.as_deref()),
            (Some(200), Some(150), None)
        );
        assert_eq!(
            (worker.role.as_str(), worker.worker_id),
            ("worker", Some(0))
        );
        assert_eq!(
            worker.note.as_deref(),
            Some("peak since process start (inside the window)")
        );
        let no_main = line.replace("\"main\":{", "\"primary\":{");
        assert!(decode(2, &no_main).is_err(), "a memory without main");
    }

    #[test]
    fn worker_tracks_are_read_in_diagnostic_epochs_only_and_checked() {
        let diag = r#"{"type":"epoch","mode":"diagnostic","epoch":0,"seconds":0.5,"samples":8,"steps":2,"bytes":100,"host_peak_rss_bytes":1,"children_peak_rss_bytes":null,"iterator_creation_s":0.01,"next_wait_ns":[1,2],"transfer_ns":[0,0],"compute_ns":[3,4]}"#;
        let tracks = r#""worker_tracks":{"kind":"processes","workers":2,"batches":{"batch":[0,1],"worker":[0,1],"start_ns":[5,6],"build_ns":[9,9],"collate_ns":[1,1],"samples":[4,4],"first_sample":[0,4],"sample_rows":[0,0]},"samples":{"index":[],"start_ns":[],"stages":[]},"steps":{"batch":[0,1],"delivered_ns":[20,30]}}"#;
        let with = diag.replace("\"compute_ns\"", &format!("{tracks},\"compute_ns\""));
        let Ok(Line::Epoch(e)) = decode(3, &with) else {
            panic!("{:?}", decode(3, &with));
        };
        assert_eq!(e.worker_tracks.as_ref().unwrap().batches.worker, vec![0, 1]);
        let bad = with.replace("\"worker\":[0,1]", "\"worker\":[0,2]");
        let err = decode(3, &bad).unwrap_err().to_string();
        assert!(err.contains("worker 2 of 2 workers"), "{err}");
        let short = with.replace("\"delivered_ns\":[20,30]", "\"delivered_ns\":[20]");
        assert!(decode(3, &short).is_err());
        let whole = with
            .replace("\"diagnostic\"", "\"whole_run\"")
            .replace(
                ",\"iterator_creation_s\":0.01,\"next_wait_ns\":[1,2],\"transfer_ns\":[0,0]",
                "",
            )
            .replace(",\"compute_ns\":[3,4]", "");
        let err = decode(3, &whole).unwrap_err().to_string();
        assert!(err.contains("worker_tracks in a whole_run epoch"), "{err}");
    }
}
