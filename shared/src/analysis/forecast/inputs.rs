//! A job configuration's forecast inputs, read from its bundle: the
//! DataLoader settings PyTorch used (`actual_*`), the batch's bytes, the
//! warm-up, and the last whole-run window that recorded its processes (the
//! same window the job's memory table shows).

use crate::format::{
    Configuration, Experiment, ForecastInputs, ParamValue, ProcessMemory, Run, TimingMode,
    WorkerWindow,
};

/// The inputs of `c`'s forecast; `None` without `actual_num_workers` or a
/// whole-run window that recorded its samples and processes.
pub fn forecast_inputs(e: &Experiment, c: &Configuration) -> Option<ForecastInputs> {
    let run = last_window(c)?;
    let processes = &run.memory.as_ref()?.processes;
    let int = |k: &str| match c.params.get(k) {
        Some(ParamValue::Int(n)) => u64::try_from(*n).ok(),
        _ => None,
    };
    let flag = |k: &str| matches!(c.params.get(k), Some(ParamValue::Bool(true)));
    let workers = u32::try_from(int("actual_num_workers")?).ok()?;
    let warmup = match e.settings.get("warmup") {
        Some(ParamValue::Int(n)) => u64::try_from(*n).unwrap_or(0),
        _ => 0,
    };
    let main = processes.iter().find(|p| p.role == "main");
    Some(ForecastInputs {
        workers,
        prefetch_factor: int("actual_prefetch_factor").and_then(|p| u32::try_from(p).ok()),
        batch_bytes: c.batch_bytes,
        pin_memory: flag("actual_pin_memory"),
        persistent_workers: flag("actual_persistent_workers"),
        start_method: match c.params.get("actual_start_method") {
            Some(ParamValue::Text(m)) => Some(m.clone()),
            _ => None,
        },
        shuffle: shuffle(e),
        dataset_len: int("actual_dataset_len"),
        samples_before_window: warmup * int("actual_batch_size").unwrap_or(0),
        samples_in_window: run.whole_run.as_ref()?.samples?,
        main_rss_bytes: main.and_then(|p| p.peak_rss_bytes.or(p.rss_bytes)),
        workers_uss: processes.iter().filter_map(worker_window).collect(),
    })
}

/// The last whole-run run with samples and processes.
fn last_window(c: &Configuration) -> Option<&Run> {
    c.runs.iter().rfind(|r| {
        r.timing_mode == TimingMode::WholeRun
            && r.whole_run.as_ref().is_some_and(|w| w.samples.is_some())
            && r.memory.as_ref().is_some_and(|m| !m.processes.is_empty())
    })
}

fn worker_window(p: &ProcessMemory) -> Option<WorkerWindow> {
    (p.role == "worker").then_some(())?;
    Some(WorkerWindow {
        worker_id: p.worker_id?,
        uss_at_open_bytes: p.uss_at_open_bytes?,
        uss_bytes: p.uss_bytes?,
    })
}

/// Whether the job's sampler shuffles, from its class name.
fn shuffle(e: &Experiment) -> Option<bool> {
    let Some(ParamValue::Text(s)) = e.settings.get("dataloader_sampler") else {
        return None;
    };
    // A DistributedSampler shuffles or not as it was built: unknown.
    if s.ends_with(".RandomSampler") {
        Some(true)
    } else if s.ends_with(".SequentialSampler") {
        Some(false)
    } else {
        None
    }
}
