//! A job unit's records, read back from its folder (`docs/job-protocol.md`):
//! one JSON-lines file per Python process that built or iterated a
//! DataLoader. The measured process is the one that opened a window; its
//! `steps` chunks, `done` or `end` (with the window's CPU time), `cold`,
//! `loader` and `memory` records make the unit's run, every figure through
//! `shared`'s builders.

use std::path::Path;

use serde_json::Value;
use stallscope_bundle::analysis::diagnostic_from_window;
use stallscope_bundle::{
    CpuCost, CpuPart, CpuPartKind, LoaderStats, Memory, ProcessMemory, Run, StepSeries, TimingMode,
    WholeRun,
};
use stallscope_core::EpochSlot;

/// The version of `docs/job-protocol.md` this reader speaks.
pub const PROTOCOL: u32 = 2;

/// One process's records, in the order it wrote them.
pub struct ProcFile {
    pub name: String,
    pub records: Vec<Value>,
}

impl ProcFile {
    /// The records of `kind`.
    pub fn of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.records
            .iter()
            .filter(move |r| r["type"].as_str() == Some(kind))
    }

    /// The first record of `kind`.
    pub fn first<'a>(&'a self, kind: &'a str) -> Option<&'a Value> {
        self.of(kind).next()
    }
}

/// Every `proc-*.jsonl` of `dir`, sorted by name; a line that is not JSON
/// names its file and line.
pub fn read_dir(dir: &Path) -> Result<Vec<ProcFile>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("proc-") && name.ends_with(".jsonl")) {
            continue;
        }
        // The one reader of JSON-lines records (stallscope-python).
        let records: Vec<Value> =
            stallscope_python::read_file(&entry.path()).map_err(|e| e.to_string())?;
        files.push(ProcFile { name, records });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// The process whose measured window opened (the lowest rank's, when every
/// rank measured its own).
pub fn measured(files: &[ProcFile]) -> Option<&ProcFile> {
    let rank = |f: &ProcFile| {
        f.first("hello")
            .and_then(|h| h["rank_env"]["RANK"].as_str())
            .and_then(|r| r.parse::<u32>().ok())
            .unwrap_or(0)
    };
    files
        .iter()
        .filter(|f| f.first("window").is_some())
        .min_by_key(|f| rank(f))
}

/// The window's per-step series, its chunks joined in order.
pub struct Steps {
    pub step_ns: Vec<u64>,
    pub samples: Vec<u64>,
    pub bytes: Vec<u64>,
    pub series: StepSeries,
}

fn numbers(v: &Value, key: &str) -> Vec<u64> {
    v[key]
        .as_array()
        .map(|a| a.iter().map(|x| x.as_u64().unwrap_or(0)).collect())
        .unwrap_or_default()
}

/// Join a process's `steps` chunks.
pub fn steps(f: &ProcFile) -> Steps {
    let mut s = Steps {
        step_ns: Vec::new(),
        samples: Vec::new(),
        bytes: Vec::new(),
        series: StepSeries::default(),
    };
    for chunk in f.of("steps") {
        s.step_ns.extend(numbers(chunk, "step_ns"));
        s.samples.extend(numbers(chunk, "samples"));
        s.bytes.extend(numbers(chunk, "bytes"));
        s.series.next_wait_ns.extend(numbers(chunk, "next_wait_ns"));
        s.series.transfer_ns.extend(numbers(chunk, "transfer_ns"));
        s.series.compute_ns.extend(numbers(chunk, "compute_ns"));
    }
    s
}

/// The unit's run of `mode`, `repeat` from a completed window (`done`).
pub fn run(f: &ProcFile, done: &Value, mode: &TimingMode, repeat: u32) -> Run {
    let s = steps(f);
    let (samples, bytes) = match unseen_delivered(done) {
        Some(delivered) => delivered,
        None => (
            done["samples"]
                .as_u64()
                .unwrap_or_else(|| s.samples.iter().sum()),
            done["bytes"]
                .as_u64()
                .unwrap_or_else(|| s.bytes.iter().sum()),
        ),
    };
    // Validation spans inside the window are not training steps.
    let seconds =
        done["window_s"].as_f64().unwrap_or(0.0) - done["apart_s"].as_f64().unwrap_or(0.0);
    let steps = s.step_ns.len() as u64;
    // The window follows the warm-up steps: a steady run (the slot of a
    // steady epoch, so its id and phase follow the one loop's rule).
    let mut run = EpochSlot {
        mode: mode.clone(),
        repeat,
        epoch: 1,
    }
    .run();
    let cold = f.first("cold");
    match mode {
        TimingMode::Diagnostic => {
            let creation = cold.and_then(|c| c["iterator_creation_s"].as_f64());
            run.diagnostic = Some(diagnostic_from_window(
                &s.series, seconds, samples, bytes, creation,
            ));
            run.steps = Some(s.series);
        }
        _ => run.whole_run = Some(WholeRun::measured(seconds, samples, steps, bytes)),
    }
    run.loader = Some(LoaderStats {
        time_to_first_batch_s: cold.and_then(|c| c["time_to_first_batch_s"].as_f64()),
        ..LoaderStats::default()
    });
    run.memory = memory(f);
    run.cost = cost(&done["cpu"], samples);
    run
}

/// When the training thread's batches were not seen (`wait.method`
/// `unseen`), the samples and bytes come from the DataLoaders another
/// thread iterated for it, as they delivered them in the window (ahead of
/// the training thread by what its buffer holds).
fn unseen_delivered(done: &Value) -> Option<(u64, u64)> {
    if done["wait"]["method"].as_str() != Some("unseen") {
        return None;
    }
    let feeders = done["wait"]["loaders_iterated_elsewhere_unseen"].as_array()?;
    let windows = done["loaders"]
        .as_array()?
        .iter()
        .filter(|l| feeders.contains(&l["loader"]));
    let (mut samples, mut bytes) = (0, 0);
    for l in windows {
        samples += l["window"]["samples"].as_u64().unwrap_or(0);
        bytes += l["window"]["bytes"].as_u64().unwrap_or(0);
    }
    (samples > 0).then_some((samples, bytes))
}

/// The window's CPU time over the process tree (`done`'s `cpu`): every
/// process of the command, DataLoader workers included.
fn cost(cpu: &Value, samples: u64) -> Option<CpuCost> {
    let cpu_s = cpu["cpu_s"].as_f64()?;
    let parts = cpu["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| CpuPart {
            name: p["name"].as_str().unwrap_or("?").to_string(),
            kind: CpuPartKind::Process,
            user_s: p["user_s"].as_f64().unwrap_or(0.0),
            system_s: p["system_s"].as_f64().unwrap_or(0.0),
            peak_rss_bytes: p["peak_rss_bytes"].as_u64(),
        })
        .collect();
    Some(CpuCost {
        wall_s: cpu["wall_s"].as_f64().unwrap_or(0.0),
        cpu_s,
        cpu_s_per_1000_samples: (samples > 0).then(|| cpu_s / samples as f64 * 1000.0),
        parts,
    })
}

/// The process's memory at the window's end: the main process's peak, the
/// DataLoader workers' resident memory summed, and each process's RSS, PSS
/// and USS.
fn memory(f: &ProcFile) -> Option<Memory> {
    let m = f.first("memory")?;
    let training = training_loader(f);
    let processes: Vec<ProcessMemory> = m["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| process_memory(p, training))
        .collect();
    // Protocol 2 gives the workers' sum of peaks in the window; version 1
    // had only their RSS at its end.
    let workers = m["workers_peak_rss_bytes"].as_u64().or_else(|| {
        let sum: u64 = processes
            .iter()
            .filter(|p| p.role == "worker")
            .filter_map(|p| p.rss_bytes)
            .sum();
        (sum > 0).then_some(sum)
    });
    Some(Memory {
        host_peak_rss_bytes: m["main_peak_rss_bytes"].as_u64(),
        workers_peak_rss_bytes: workers,
        processes,
        ..Memory::default()
    })
}

/// The construction index of the DataLoader that fed the training steps
/// (`done`'s `loaders`, `role` training or both); `None` when unsaid.
pub fn training_loader(f: &ProcFile) -> Option<u64> {
    let done = f.first("done").or_else(|| f.first("end"))?;
    done["loaders"]
        .as_array()?
        .iter()
        .find(|l| matches!(l["role"].as_str(), Some("training" | "both")))
        .and_then(|l| l["loader"].as_u64())
}

/// One entry of a `memory` record's `processes`: a worker of another
/// DataLoader than the training one (a validation loader's) is a child,
/// so a configuration's workers are its training loader's.
fn process_memory(p: &Value, training: Option<u64>) -> ProcessMemory {
    let bytes = |k: &str| p[k].as_u64();
    let other_loader = p["role"] == "worker"
        && training.is_some_and(|t| p["loader"].as_u64().is_some_and(|l| l != t));
    let note = match (other_loader, p["why"].as_str()) {
        (true, why) => Some(format!(
            "a worker of DataLoader #{} (not the training one){}",
            p["loader"],
            why.map_or(String::new(), |w| format!("; {w}"))
        )),
        (false, why) => why.map(String::from),
    };
    ProcessMemory {
        role: if other_loader {
            "child".to_string()
        } else {
            p["role"].as_str().unwrap_or("?").to_string()
        },
        peak_rss_bytes: bytes("peak_rss_bytes"),
        uss_at_open_bytes: bytes("uss_open_bytes"),
        worker_id: p["worker_id"].as_u64().and_then(|w| u32::try_from(w).ok()),
        rss_bytes: bytes("rss_bytes"),
        pss_bytes: bytes("pss_bytes"),
        uss_bytes: bytes("uss_bytes"),
        swap_bytes: bytes("swap_bytes"),
        note,
    }
}

/// What a window that did not complete measured before it ended: a run of
/// its completed steps (their own sums: the step in progress, a hang
/// included, is left out); `None` when no step completed.
pub fn partial_run(f: &ProcFile, mode: &TimingMode, repeat: u32) -> Option<Run> {
    let s = steps(f);
    if s.step_ns.is_empty() {
        return None;
    }
    let progress = serde_json::json!({
        "samples": s.samples.iter().sum::<u64>(),
        "bytes": s.bytes.iter().sum::<u64>(),
        "window_s": s.step_ns.iter().sum::<u64>() as f64 / 1e9,
    });
    Some(run(f, &progress, mode, repeat))
}

/// The measured loader's record, as the DataLoader really ran: the one
/// that fed the training steps (`done`'s roles), else the one the window
/// first took a batch from (`cold`).
pub fn measured_loader(f: &ProcFile) -> Option<&Value> {
    let index = training_loader(f).or_else(|| f.first("cold").and_then(|c| c["loader"].as_u64()));
    f.of("loader")
        .find(|l| index.is_none_or(|i| l["index"].as_u64() == Some(i)))
}

/// The measured loader's record of the process that measured it, else the
/// first DataLoader any process of the unit built (a process that failed
/// before its window still wrote it at construction).
pub fn any_loader(files: &[ProcFile]) -> Option<&Value> {
    measured(files)
        .and_then(measured_loader)
        .or_else(|| files.iter().find_map(|f| f.first("loader")))
}
