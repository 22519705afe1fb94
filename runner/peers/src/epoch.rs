//! An epoch line as a bundle run, built as the native loop builds its own,
//! and what the harness's process tree used over the epoch's window.

use stallscope_bundle::analysis::diagnostic_from_series;
use stallscope_bundle::{Memory, Phase, ProcessMemory, Run, StepSeries, TimingMode, WholeRun};
use stallscope_core::cost::{TreeSnapshot, tree_cost};

use crate::protocol::{EpochLine, ProcessPeak, mode};

/// One epoch line as a bundle run: the same run id, phase and fields as the
/// native loop writes, the stages computed by `shared` from the series.
pub(crate) fn to_run(e: &EpochLine, repeat: u32) -> Run {
    let m = mode(&e.mode);
    let phase = if e.epoch == 0 {
        Phase::Cold
    } else {
        Phase::Steady
    };
    let mut run = Run::new(
        format!("{}-r{repeat}-e{}", m.as_str(), e.epoch),
        m.clone(),
        repeat,
        e.epoch,
        phase,
    );
    match m {
        TimingMode::WholeRun => {
            run.whole_run = Some(WholeRun::measured(e.seconds, e.samples, e.steps, e.bytes))
        }
        _ => {
            let series = StepSeries {
                next_wait_ns: e.next_wait_ns.clone().unwrap_or_default(),
                transfer_ns: e.transfer_ns.clone().unwrap_or_default(),
                compute_ns: e.compute_ns.clone().unwrap_or_default(),
                comm_ns: e.comm_ns.clone().unwrap_or_default(),
            };
            run.diagnostic = Some(diagnostic_from_series(
                &series,
                e.seconds,
                e.samples,
                e.bytes,
                e.iterator_creation_s,
            ));
            run.steps = Some(series);
            run.worker_tracks = e.worker_tracks.clone();
        }
    }
    run.loader = e.loader.clone();
    let processes = e.memory.as_ref().map_or_else(Vec::new, |m| {
        std::iter::once(process(&m.main, "main"))
            .chain(m.workers.iter().map(|w| process(w, "worker")))
            .collect()
    });
    run.memory = Some(Memory {
        host_peak_rss_bytes: e.host_peak_rss_bytes,
        workers_peak_rss_bytes: e.children_peak_rss_bytes,
        processes,
        ..Memory::default()
    });
    run
}

/// One process of the epoch's `memory` as the bundle keeps it: a peak not
/// reset at the epoch's start says since when it holds.
fn process(p: &ProcessPeak, role: &str) -> ProcessMemory {
    let since = p
        .peak_since
        .as_deref()
        .filter(|s| *s != "window")
        .map(|s| format!("peak since {s}"));
    let note = match (since, p.why.as_deref()) {
        (Some(s), Some(w)) => Some(format!("{s}; {w}")),
        (s, w) => s.or_else(|| w.map(String::from)),
    };
    ProcessMemory {
        role: role.to_string(),
        worker_id: p.worker_id,
        rss_bytes: p.rss_bytes,
        pss_bytes: p.pss_bytes,
        uss_bytes: p.uss_bytes,
        swap_bytes: p.swap_bytes,
        note,
        peak_rss_bytes: p.peak_rss_bytes,
        uss_at_open_bytes: p.uss_open_bytes,
    }
}

/// The CPU the harness's tree used from `before` (the line before the
/// epoch's) to `now` (its own). The workers' peak is the harness's own
/// reading of the epoch (reset at its start); the tree's lifetime peaks
/// stand in only for a harness that sent no `memory`.
pub(crate) fn add_cost(run: &mut Run, before: &TreeSnapshot, now: &TreeSnapshot, samples: u64) {
    run.cost = Some(tree_cost(before, now, samples, "harness"));
    if let Some(m) = run.memory.as_mut().filter(|m| m.processes.is_empty()) {
        m.workers_peak_rss_bytes =
            now.descendants_peak_rss_bytes(Some(before), m.workers_peak_rss_bytes);
    }
}
