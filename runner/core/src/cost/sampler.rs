//! The timeline sampler: a side thread that wakes about 20 times a second
//! during a whole-run epoch and records host CPU (runner process plus worker
//! processes, in cores), resident memory, the steps handed out so far and,
//! on CUDA, the GPU's counters. It reads a few files per sample
//! (`/proc/self/statm`, one `stat` per worker process), never touches the
//! device queue and never synchronises; stopping wakes it at once. For the
//! peer engines it follows the harness's process tree instead of a worker
//! list, and there is no step counter to read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stallscope_bundle::{GpuTimeline, Timeline};
use stallscope_loader::{WorkerKind, WorkerRegistry};

use super::account::read_worker;
use super::nvml::{self, GpuTarget};
use super::proc;

/// The sampler's nominal interval (20 Hz).
pub const INTERVAL: Duration = Duration::from_millis(50);

/// What to sample.
pub struct SamplerSpec {
    pub interval: Duration,
    /// The loader's workers (their processes are added to the host series).
    pub workers: Option<WorkerRegistry>,
    /// Steps handed out so far (bumped by the loop's feed); `None` leaves
    /// the steps series empty (a peer harness reports no progress).
    pub steps: Option<Arc<AtomicU64>>,
    /// A process whose whole tree is added to the host series (the peer
    /// harness and its workers).
    pub tree: Option<u32>,
    pub gpu: GpuTarget,
    /// Only the caching allocator and `cudaMemGetInfo` on the GPU, no NVML
    /// (fast enough for a millisecond interval over one step).
    pub allocator_only: bool,
}

type Stop = Arc<(Mutex<bool>, Condvar)>;

/// A running sampler; [`Sampler::finish`] stops and joins it.
pub struct Sampler {
    stop: Stop,
    handle: Option<JoinHandle<Timeline>>,
}

impl Sampler {
    /// Start the side thread; its clock starts now. NVML is opened and the
    /// first counters read here, before the caller's epoch clock starts, so
    /// the new thread only waits for its first tick.
    pub fn start(spec: SamplerSpec) -> std::io::Result<Sampler> {
        let stop: Stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let gpu = nvml::open(&spec.gpu, !spec.allocator_only);
        let host = HostReader {
            workers: spec.workers.clone(),
            tree: spec.tree,
        };
        let first = host.read();
        let started = Instant::now();
        let handle = std::thread::Builder::new()
            .name("stallscope-sampler".into())
            .spawn(move || run(spec, gpu, host, first, started, &flag))?;
        Ok(Sampler {
            stop,
            handle: Some(handle),
        })
    }

    fn stop_and_join(&mut self) -> Option<std::thread::Result<Timeline>> {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        self.handle.take().map(JoinHandle::join)
    }

    /// Stop it (it takes one last sample) and return the timeline.
    pub fn finish(mut self) -> Timeline {
        match self.stop_and_join() {
            Some(Ok(tl)) => tl,
            _ => Timeline {
                gpu_not_available: Some("the sampler thread panicked".into()),
                ..Timeline::default()
            },
        }
    }
}

/// An epoch that fails still stops its sampler.
impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Busy CPU-seconds of the run so far, by source: the runner process and each
/// worker process (keyed by pool generation and index).
struct HostReader {
    workers: Option<WorkerRegistry>,
    tree: Option<u32>,
}

struct HostNow {
    cpu_s: f64,
    workers_cpu: HashMap<(u64, usize), f64>,
    /// The followed tree's CPU-seconds: per live process its own time plus
    /// its reaped children's, so an ended worker's time stays counted.
    tree_cpu_s: f64,
    rss_bytes: u64,
}

impl HostReader {
    fn read(&self) -> HostNow {
        let mut now = HostNow {
            cpu_s: proc::self_times().total(),
            workers_cpu: HashMap::new(),
            tree_cpu_s: 0.0,
            rss_bytes: proc::self_rss_bytes().unwrap_or(0),
        };
        for pid in self.tree.map(proc::tree).unwrap_or_default() {
            if let Some(st) = proc::process_stat(pid) {
                now.tree_cpu_s += st.times.total() + st.children_times.total();
                now.rss_bytes += st.rss_bytes;
            }
        }
        let list = self
            .workers
            .as_ref()
            .map(|r| r.snapshot())
            .unwrap_or_default();
        for w in list.iter().filter(|w| w.kind == WorkerKind::Processes) {
            if w.ended.is_none() {
                if let Some(st) = proc::process_stat(w.id) {
                    now.workers_cpu
                        .insert((w.generation, w.worker), st.times.total());
                    now.rss_bytes += st.rss_bytes;
                }
            } else if let Some(r) = read_worker(w, false) {
                now.workers_cpu
                    .insert((w.generation, w.worker), r.times.total());
            }
        }
        now
    }
}

/// CPU-seconds used between two readings: the runner's growth plus each
/// worker process's (one new since `prev` counts from zero).
fn cpu_between(prev: &HostNow, now: &HostNow) -> f64 {
    let workers: f64 = now
        .workers_cpu
        .iter()
        .map(|(k, v)| (v - prev.workers_cpu.get(k).copied().unwrap_or(0.0)).max(0.0))
        .sum();
    (now.cpu_s - prev.cpu_s).max(0.0) + workers + (now.tree_cpu_s - prev.tree_cpu_s).max(0.0)
}

fn run(
    spec: SamplerSpec,
    (probe, why): (Option<nvml::GpuProbe>, Option<String>),
    host: HostReader,
    first: HostNow,
    started: Instant,
    stop: &Stop,
) -> Timeline {
    let mut probe = probe;
    let mut gpu = GpuTimeline::default();
    let mut tl = Timeline {
        interval_s: spec.interval.as_secs_f64(),
        gpu_not_available: why,
        ..Timeline::default()
    };
    let mut prev = first;
    let mut prev_at = started;
    let mut next = started + spec.interval;
    let (lock, cv) = &**stop;
    loop {
        let stopped = {
            let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let now = Instant::now();
                if *s || now >= next {
                    break *s;
                }
                s = cv
                    .wait_timeout(s, next - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        };
        let at = Instant::now();
        let dt = at.saturating_duration_since(prev_at).as_secs_f64();
        // A stop right after a sample: a new one would only add noise to the
        // CPU series, so the last one takes the final step count instead.
        if stopped && dt < spec.interval.as_secs_f64() / 10.0 && !tl.t_ms.is_empty() {
            if let (Some(last), Some(steps)) = (tl.steps.last_mut(), &spec.steps) {
                *last = steps.load(Ordering::Relaxed);
            }
        } else {
            let now = host.read();
            tl.t_ms
                .push(at.saturating_duration_since(started).as_millis() as u32);
            if let Some(steps) = &spec.steps {
                tl.steps.push(steps.load(Ordering::Relaxed));
            }
            tl.host_cpu_cores
                .push((cpu_between(&prev, &now) / dt.max(1e-6)) as f32);
            tl.host_rss_bytes.push(now.rss_bytes);
            if let Some(p) = probe.as_mut() {
                p.sample(&mut gpu);
            }
            prev = now;
            prev_at = at;
        }
        if stopped {
            break;
        }
        next += spec.interval;
        if next <= at {
            // Fell behind (a slow NVML read, a busy machine): skip, not burst.
            next = at + spec.interval;
        }
    }
    if probe.is_some() && gpu != GpuTimeline::default() {
        tl.gpu = Some(gpu);
    }
    tl.sampler_cpu_s = Some(proc::this_thread_times().total());
    tl
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(interval_ms: u64, steps: &Arc<AtomicU64>) -> SamplerSpec {
        SamplerSpec {
            interval: Duration::from_millis(interval_ms),
            workers: None,
            steps: Some(Arc::clone(steps)),
            tree: None,
            gpu: GpuTarget::None("the device is the CPU".into()),
            allocator_only: false,
        }
    }

    /// Whatever happens while it runs, every series has one entry per
    /// sample, times and steps never go back, and a stop is answered with the
    /// last sample (no wait for the next tick).
    #[test]
    fn series_stay_aligned_and_monotonic() {
        let steps = Arc::new(AtomicU64::new(0));
        let s = Sampler::start(spec(5, &steps)).unwrap();
        let mut x = 1.0f64;
        for i in 0..40u64 {
            for _ in 0..20_000 {
                x = std::hint::black_box((x * 1.000_001).sqrt() + 1.0);
            }
            steps.store(i + 1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
        }
        let tl = s.finish();
        let n = tl.t_ms.len();
        assert!(n >= 1);
        assert_eq!(tl.steps.len(), n);
        assert_eq!(tl.host_cpu_cores.len(), n);
        assert_eq!(tl.host_rss_bytes.len(), n);
        assert!(tl.t_ms.windows(2).all(|w| w[0] <= w[1]));
        assert!(tl.steps.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(
            *tl.steps.last().unwrap(),
            40,
            "the last sample is taken at the stop"
        );
        assert!(tl.host_cpu_cores.iter().all(|c| c.is_finite() && *c >= 0.0));
        assert!(tl.host_rss_bytes.iter().all(|&r| r > 1 << 20));
        assert_eq!(
            tl.gpu_not_available.as_deref(),
            Some("the device is the CPU")
        );
        assert!(tl.gpu.is_none());
        assert!(tl.sampler_cpu_s.unwrap() >= 0.0);
        assert_eq!(tl.interval_s, 0.005);
    }

    #[test]
    fn a_worker_process_new_since_the_last_sample_counts_from_zero() {
        let prev = HostNow {
            cpu_s: 1.0,
            workers_cpu: HashMap::from([((1, 0), 2.0), ((1, 1), 5.0)]),
            tree_cpu_s: 3.0,
            rss_bytes: 0,
        };
        let now = HostNow {
            cpu_s: 1.5,
            workers_cpu: HashMap::from([((1, 0), 2.25), ((2, 0), 0.5)]),
            tree_cpu_s: 3.5,
            rss_bytes: 0,
        };
        assert_eq!(cpu_between(&prev, &now), 0.5 + 0.25 + 0.5 + 0.5);
    }
}
