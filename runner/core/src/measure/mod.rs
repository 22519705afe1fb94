//! The one timing loop. Every epoch of every Rust back end runs here, in the
//! two timing modes of methodology.md; a back end supplies only its step's
//! parts ([`Steps`], [`EpochSteps`]): the next batch, the copy, the compute,
//! and how to wait for its device. This module owns the rest, so it is the
//! same for every back end:
//! - the clocks, and where synchronisation happens: whole-run epochs wait
//!   for the device once before and once after the epoch and read no clock
//!   inside it; diagnostic epochs wait at every stage boundary of every step
//!   and time iterator creation apart;
//! - the run id and cold/steady ([`EpochSlot`]);
//! - the per-epoch reset and read of peak memory (the host's through
//!   [`crate::host`], the device's through the back end);
//! - the step series, handed to `shared`'s `diagnostic_from_series` and
//!   `WholeRun::measured`;
//! - the ranks' per-step hook (in whole-run epochs the device is waited for
//!   before each barrier, so the ranks line up finished steps), the slowed
//!   rank, the interrupt check, and the epoch's cost watch;
//! - the loader's worker tracks: asked for in diagnostic epochs only, so a
//!   whole-run epoch's workers record nothing.
//!
//! Like criterion's `Routine`/`Measurement` split: the loop is the
//! framework's, the work is the back end's. Nothing here knows a device.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use stallscope_bundle::analysis::diagnostic_from_series;
use stallscope_bundle::{
    Diagnostic, LoaderStats, Memory, Phase, Run, StepSeries, TimingMode, WholeRun, WorkerTracks,
};
use stallscope_loader::WorkerRegistry;

use crate::cost::{EpochWatch, GpuTarget};

mod error;
#[cfg(test)]
mod tests;

pub use error::LoopError;

/// Where one epoch sits in the sweep: its mode, repeat and index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochSlot {
    pub mode: TimingMode,
    pub repeat: u32,
    pub epoch: u32,
}

impl EpochSlot {
    /// The first epoch of a (mode, repeat) is cold; the others are steady.
    pub fn phase(&self) -> Phase {
        if self.epoch == 0 {
            Phase::Cold
        } else {
            Phase::Steady
        }
    }

    /// `whole_run-r0-e1`: unique within a configuration.
    pub fn run_id(&self) -> String {
        format!("{}-r{}-e{}", self.mode.as_str(), self.repeat, self.epoch)
    }

    /// An empty run of this slot.
    pub fn run(&self) -> Run {
        Run::new(
            self.run_id(),
            self.mode.clone(),
            self.repeat,
            self.epoch,
            self.phase(),
        )
    }
}

/// What the batch just taken held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Taken {
    pub samples: u64,
    /// Bytes of its inputs and labels.
    pub bytes: u64,
}

/// Which stages a back end's step has. A stage it lacks is recorded as 0 in
/// diagnostic series and never timed (a loader-only loop has no copy and no
/// compute).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stages {
    pub transfer: bool,
    pub compute: bool,
}

impl Stages {
    /// next-wait, transfer and compute.
    pub const ALL: Stages = Stages {
        transfer: true,
        compute: true,
    };
    /// next-wait only (`model = "none"`).
    pub const LOADER_ONLY: Stages = Stages {
        transfer: false,
        compute: false,
    };
}

/// One epoch's batches and the work on each, as the back end does it. The
/// loop calls `next`, then `copy` and `compute` on the batch it took.
pub trait EpochSteps {
    /// Take the next batch (the next-wait stage); `None` at the epoch's end.
    fn next(&mut self) -> Result<Option<Taken>, LoopError>;
    /// Copy the batch taken last to the device (the transfer stage).
    fn copy(&mut self) -> Result<(), LoopError>;
    /// The train step on the batch copied last (the compute stage).
    fn compute(&mut self) -> Result<(), LoopError>;
    /// Wait until the device has done everything queued so far.
    fn synchronize(&mut self) -> Result<(), LoopError>;
}

/// A back end's side of the loop for one configuration and mode: what it
/// starts each epoch with, and what the loop asks of it around the epoch.
pub trait Steps {
    /// Wait until the device has done everything queued so far (nothing to
    /// do where operations finish before they return, as on the CPU).
    fn synchronize(&mut self) -> Result<(), LoopError>;
    /// Start epoch `epoch` (its creation is timed as iterator creation).
    /// `mode` lets a back end that overlaps copy and compute (a side stream)
    /// fuse them in whole-run epochs, where nothing is timed per stage.
    fn start_epoch(
        &mut self,
        epoch: u32,
        mode: &TimingMode,
    ) -> Result<Box<dyn EpochSteps + '_>, LoopError>;
    /// The stages the step has.
    fn stages(&self) -> Stages {
        Stages::ALL
    }
    /// Reset the device's peak memory counters (before an epoch).
    fn reset_device_peaks(&mut self) {}
    /// The device's memory counters now, into `memory` (after an epoch).
    fn device_memory(&mut self, _memory: &mut Memory) {}
    /// What the loader measured about itself during the last epoch.
    fn loader_stats(&mut self) -> Option<LoaderStats> {
        None
    }
    /// The loader's workers as the OS knows them, for the cost watch.
    fn workers(&self) -> Option<WorkerRegistry> {
        None
    }
    /// Have the loader record worker tracks in the next epoch (`on` exactly
    /// for diagnostic epochs), or stop recording them.
    fn trace_workers(&mut self, _on: bool) {}
    /// The worker tracks the loader recorded in the last epoch.
    fn worker_tracks(&mut self) -> Option<WorkerTracks> {
        None
    }
    /// The GPU the timeline samples, or why there is none.
    fn gpu(&self) -> GpuTarget;
}

/// Run one epoch of `steps` in `slot.mode` and return its [`Run`]: the
/// figures of its mode, its loader statistics, memory and cost.
pub fn run_epoch(
    steps: &mut dyn Steps,
    slot: &EpochSlot,
    stop: &AtomicBool,
) -> Result<Run, LoopError> {
    crate::host::reset_peak_rss();
    steps.reset_device_peaks();
    let whole_run = slot.mode == TimingMode::WholeRun;
    steps.trace_workers(slot.mode == TimingMode::Diagnostic);
    let watch = EpochWatch::start(steps.workers(), steps.gpu(), whole_run);
    let taken = watch.steps();
    let mut run = slot.run();
    match slot.mode {
        TimingMode::WholeRun => {
            run.whole_run = Some(whole_run_epoch(steps, slot.epoch, stop, &taken)?);
        }
        TimingMode::Diagnostic => {
            let (d, series) = diagnostic_epoch(steps, slot.epoch, stop, &taken)?;
            run.diagnostic = Some(d);
            run.steps = Some(series);
            run.worker_tracks = steps.worker_tracks();
        }
        TimingMode::Unknown(_) => unreachable!("the runner times whole_run and diagnostic only"),
    }
    run.loader = steps.loader_stats();
    let mut memory = Memory {
        host_peak_rss_bytes: crate::host::peak_rss_bytes(),
        ..Memory::default()
    };
    steps.device_memory(&mut memory);
    run.memory = Some(memory);
    watch.finish(&mut run);
    Ok(run)
}

/// Counts of one epoch.
#[derive(Default)]
struct Tally {
    samples: u64,
    bytes: u64,
    steps: u64,
}

impl Tally {
    fn add(&mut self, t: Taken, taken: &AtomicU64) {
        self.samples += t.samples;
        self.bytes += t.bytes;
        self.steps += 1;
        taken.fetch_add(1, Ordering::Relaxed);
    }
}

fn check_stop(stop: &AtomicBool) -> Result<(), LoopError> {
    if stop.load(Ordering::Relaxed) {
        return Err(LoopError::Interrupted);
    }
    Ok(())
}

/// Whole-run: one wait before, one after; no clock and no wait inside.
fn whole_run_epoch(
    steps: &mut dyn Steps,
    epoch: u32,
    stop: &AtomicBool,
    taken: &Arc<AtomicU64>,
) -> Result<WholeRun, LoopError> {
    let stages = steps.stages();
    let mut tally = Tally::default();
    // With ranks, each step's barrier lines up finished steps, not queued
    // work: the device is waited for before it (a cost the bundle notes).
    let barrier = crate::ranks::barrier_active();
    steps.synchronize()?;
    let started = Instant::now();
    {
        let mut it = steps.start_epoch(epoch, &TimingMode::WholeRun)?;
        while let Some(batch) = it.next()? {
            tally.add(batch, taken);
            crate::ranks::slow_batch();
            if stages.transfer {
                it.copy()?;
            }
            if stages.compute {
                it.compute()?;
            }
            if barrier {
                it.synchronize()?;
                crate::ranks::step_barrier(tally.steps - 1, epoch)?;
            }
            check_stop(stop)?;
        }
    }
    steps.synchronize()?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(WholeRun::measured(
        seconds,
        tally.samples,
        tally.steps,
        tally.bytes,
    ))
}

/// Diagnostic: a wait at every stage boundary, each stage timed apart.
fn diagnostic_epoch(
    steps: &mut dyn Steps,
    epoch: u32,
    stop: &AtomicBool,
    taken: &Arc<AtomicU64>,
) -> Result<(Diagnostic, StepSeries), LoopError> {
    let stages = steps.stages();
    let mut series = StepSeries::default();
    let mut tally = Tally::default();
    steps.synchronize()?;
    let started = Instant::now();
    let iterator_creation_s;
    {
        let mut it = steps.start_epoch(epoch, &TimingMode::Diagnostic)?;
        iterator_creation_s = started.elapsed().as_secs_f64();
        loop {
            let t0 = Instant::now();
            let Some(batch) = it.next()? else { break };
            tally.add(batch, taken);
            crate::ranks::slow_batch();
            it.synchronize()?;
            let t1 = Instant::now();
            let transfer = timed_stage(stages.transfer, &mut *it, |s| s.copy(), t1)?;
            let t2 = Instant::now();
            let compute = timed_stage(stages.compute, &mut *it, |s| s.compute(), t2)?;
            // The ranks' barrier after compute: its own `comm` stage.
            if let Some(ns) = crate::ranks::timed_step_barrier(tally.steps - 1, epoch)? {
                series.comm_ns.push(ns);
            }
            series.next_wait_ns.push(nanos(t1 - t0));
            series.transfer_ns.push(transfer);
            series.compute_ns.push(compute);
            check_stop(stop)?;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let diagnostic = diagnostic_from_series(
        &series,
        seconds,
        tally.samples,
        tally.bytes,
        Some(iterator_creation_s),
    );
    Ok((diagnostic, series))
}

/// Run one stage and wait for the device: its nanoseconds since `from`, or
/// 0 untimed when the step has no such stage.
fn timed_stage(
    present: bool,
    it: &mut dyn EpochSteps,
    stage: impl FnOnce(&mut dyn EpochSteps) -> Result<(), LoopError>,
    from: Instant,
) -> Result<u64, LoopError> {
    if !present {
        return Ok(0);
    }
    stage(it)?;
    it.synchronize()?;
    Ok(nanos(from.elapsed()))
}

fn nanos(d: std::time::Duration) -> u64 {
    d.as_nanos() as u64
}
