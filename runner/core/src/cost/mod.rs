//! What an epoch costs besides time (issue 12, format 1.2): CPU-seconds of
//! the runner process and of every loader worker (`Run.cost`), the worker
//! processes' peak memory (`Memory.workers_peak_rss_bytes`), and, for
//! whole-run epochs, a timeline sampled on a side thread (`Run.timeline`).
//! [`EpochWatch`] wraps one epoch: counters right before, right after.
//!
//! A public namespace of the core (`stallscope_core::cost`): its parts are
//! private and what other crates use is re-exported here.

mod account;
mod nvml;
pub(crate) mod proc;
mod sampler;
mod tree;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use stallscope_bundle::{Memory, Run};
use stallscope_loader::WorkerRegistry;

pub use account::{CpuSnapshot, epoch_cost};
pub use nvml::{DeviceCounters, GpuTarget, install_device_counters, nvml};
pub use sampler::{INTERVAL, Sampler, SamplerSpec};
pub use tree::{ENDED_PART, TreeSnapshot, tree_cost};

static TIMELINE: AtomicBool = AtomicBool::new(true);

/// Switch the timeline sampler on or off for the epochs that follow (on by
/// default; `bench overhead` measures one against the other).
pub fn set_timeline(on: bool) {
    TIMELINE.store(on, Ordering::Relaxed);
}

/// Whether whole-run epochs get a timeline.
pub fn timeline_enabled() -> bool {
    TIMELINE.load(Ordering::Relaxed)
}

/// One epoch's accounting, started right before the epoch.
pub struct EpochWatch {
    before: CpuSnapshot,
    workers: Option<WorkerRegistry>,
    steps: Arc<AtomicU64>,
    sampler: Option<Sampler>,
    sampler_error: Option<String>,
}

impl EpochWatch {
    /// Read the counters now; with `timeline`, start the sampler too.
    /// `workers` is the loader's worker list, if it has one.
    pub fn start(workers: Option<WorkerRegistry>, gpu: GpuTarget, timeline: bool) -> Self {
        let steps = Arc::new(AtomicU64::new(0));
        let (sampler, sampler_error) = if timeline && timeline_enabled() {
            match Sampler::start(SamplerSpec {
                interval: INTERVAL,
                workers: workers.clone(),
                steps: Some(Arc::clone(&steps)),
                tree: None,
                gpu,
                allocator_only: false,
            }) {
                Ok(s) => (Some(s), None),
                Err(e) => (None, Some(format!("the sampler thread did not start: {e}"))),
            }
        } else {
            (None, None)
        };
        // Each live worker process's peak restarts with the epoch, as the
        // runner's own does (one meaning of peak memory): a persistent
        // worker's figure is then this epoch's, not its life's.
        for w in workers.iter().flat_map(|r| r.snapshot()) {
            if w.ended.is_none() && w.kind == stallscope_loader::WorkerKind::Processes {
                proc::reset_peak_rss(w.id);
            }
        }
        EpochWatch {
            before: CpuSnapshot::take(workers.as_ref()),
            workers,
            steps,
            sampler,
            sampler_error,
        }
    }

    /// The counter of steps taken (the loop counts each batch it takes, so
    /// the step in progress is included).
    pub fn steps(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.steps)
    }

    /// Read the counters again (right after the epoch, before the workers
    /// are stopped) and fill `run.cost`, `run.timeline` and the worker
    /// processes' peak memory.
    pub fn finish(self, run: &mut Run) {
        let after = CpuSnapshot::take(self.workers.as_ref());
        let timeline = self.sampler.map(Sampler::finish);
        let samples = run
            .whole_run
            .as_ref()
            .and_then(|w| w.samples)
            .or_else(|| run.diagnostic.as_ref().and_then(|d| d.samples))
            .unwrap_or(0);
        let (cost, workers_peak) = epoch_cost(&self.before, &after, samples);
        run.cost = Some(cost);
        run.timeline = timeline;
        if let Some(why) = self.sampler_error {
            // Nothing is lost: the cost stands, the reason is kept.
            run.timeline = Some(stallscope_bundle::Timeline {
                interval_s: INTERVAL.as_secs_f64(),
                gpu_not_available: Some(why),
                ..Default::default()
            });
        }
        if let Some(peak) = workers_peak {
            run.memory
                .get_or_insert_with(Memory::default)
                .workers_peak_rss_bytes = Some(peak);
        }
    }
}
