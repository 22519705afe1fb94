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
        let text = std::fs::read_to_string(entry.path())
            .map_err(|e| format!("{}: {e}", entry.path().display()))?;
        let mut records = Vec::new();
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: Value = serde_json::from_str(line).map_err(|e| {
                format!(
                    "{}:{}: not a JSON record ({e})",
                    entry.path().display(),
                    i + 1
                )
            })?;
            records.push(v);
        }
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
    let samples = done["samples"]
        .as_u64()
        .unwrap_or_else(|| s.samples.iter().sum());
    let bytes = done["bytes"]
        .as_u64()
        .unwrap_or_else(|| s.bytes.iter().sum());
    let seconds = done["window_s"].as_f64().unwrap_or(0.0);
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
    let processes: Vec<ProcessMemory> = m["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(process_memory)
        .collect();
    let workers: u64 = processes
        .iter()
        .filter(|p| p.role == "worker")
        .filter_map(|p| p.rss_bytes)
        .sum();
    Some(Memory {
        host_peak_rss_bytes: m["main_peak_rss_bytes"].as_u64(),
        workers_peak_rss_bytes: (workers > 0).then_some(workers),
        processes,
        ..Memory::default()
    })
}

/// One entry of a `memory` record's `processes`.
fn process_memory(p: &Value) -> ProcessMemory {
    let bytes = |k: &str| p[k].as_u64();
    ProcessMemory {
        role: p["role"].as_str().unwrap_or("?").to_string(),
        worker_id: p["worker_id"].as_u64().and_then(|w| u32::try_from(w).ok()),
        rss_bytes: bytes("rss_bytes"),
        pss_bytes: bytes("pss_bytes"),
        uss_bytes: bytes("uss_bytes"),
        swap_bytes: bytes("swap_bytes"),
        note: p["why"].as_str().map(String::from),
        ..ProcessMemory::default()
    }
}

/// Why a process ended without completing its window, in one sentence from
/// its `end` or `error` record: the steps done of the `asked`, the exception
/// and the traceback's last line, or that the measured DataLoader (iteration
/// index `loader`) was never iterated.
pub fn ended(files: &[ProcFile], asked: u32, loader: u32) -> Option<String> {
    for f in files {
        if let Some(e) = f.first("error") {
            return Some(format!(
                "the instrumentation failed in {}: {}",
                e["where"].as_str().unwrap_or("?"),
                e["message"].as_str().unwrap_or("?")
            ));
        }
    }
    let f = files.iter().find(|f| f.first("end").is_some())?;
    let e = f.first("end")?;
    let reason = e["reason"].as_str().unwrap_or("?");
    let phase = e["phase_at_end"].as_str().unwrap_or("?");
    let mut text = if phase == "measured loader never iterated" {
        format!(
            "the script ended ({reason}) with the measured DataLoader (iteration index \
             {loader}) never iterated"
        )
    } else {
        format!(
            "the script ended ({reason}) after {} of {asked} steps, in its {phase}",
            e["steps"].as_u64().unwrap_or(0),
        )
    };
    let mut last = String::new();
    if let Some(ex) = e["exception"].as_str() {
        last = format!("{ex}: {}", e["message"].as_str().unwrap_or(""));
        text += &format!(": {last}");
    }
    if let Some(tail) = e["traceback_tail"].as_array().and_then(|t| t.last()) {
        let tail = tail.as_str().unwrap_or("").trim();
        if tail != last.trim() {
            text += &format!(" ({tail})");
        }
    }
    if e["pending_step"]["in_next"] == true {
        text += "; it was waiting in the loader's next()";
    }
    Some(text)
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

/// The measured loader's record, as the DataLoader really ran.
pub fn measured_loader(f: &ProcFile) -> Option<&Value> {
    let index = f.first("cold").and_then(|c| c["loader"].as_u64());
    f.of("loader")
        .find(|l| index.is_none_or(|i| l["index"].as_u64() == Some(i)))
}
