//! Which OS thread or process each loader worker is (thread workers: their
//! TID, recorded at thread start; process workers: their PID), and what a
//! worker used when it ended (read at its end, since `/proc` forgets it), so
//! the runner can count the workers' CPU time and memory.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

use super::worker_kind::WorkerKind;

/// CPU time and peak memory of one worker over its whole life.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WorkerUsage {
    pub user_s: f64,
    pub system_s: f64,
    /// Peak resident set size (processes only).
    pub peak_rss_bytes: Option<u64>,
}

/// One worker as the OS knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerOs {
    /// The worker's index in its pool.
    pub worker: usize,
    pub kind: WorkerKind,
    /// TID (thread workers, a thread of this process) or PID (process workers).
    pub id: u32,
    /// Which pool this is (a new pool, a new generation), so a reused TID or
    /// PID is never taken for an earlier worker.
    pub generation: u64,
    /// What it used in all, once it has ended.
    pub ended: Option<WorkerUsage>,
}

#[derive(Debug, Default)]
struct Registry {
    generation: u64,
    workers: Vec<WorkerOs>,
}

/// The workers of the loader's current (or most recent) pool; cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct WorkerRegistry {
    inner: Arc<Mutex<Registry>>,
}

impl WorkerRegistry {
    /// The workers now, by index.
    pub fn snapshot(&self) -> Vec<WorkerOs> {
        let mut v = self.lock().workers.clone();
        v.sort_by_key(|w| w.worker);
        v
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new pool starts: forget the old workers; the new pool's generation.
    pub(crate) fn new_pool(&self) -> u64 {
        let mut r = self.lock();
        r.generation += 1;
        r.workers.clear();
        r.generation
    }

    pub(crate) fn started(&self, generation: u64, worker: usize, kind: WorkerKind, id: u32) {
        let mut r = self.lock();
        if r.generation == generation {
            r.workers.push(WorkerOs {
                worker,
                kind,
                id,
                generation,
                ended: None,
            });
        }
    }

    pub(crate) fn ended(&self, generation: u64, worker: usize, usage: WorkerUsage) {
        let mut r = self.lock();
        if let Some(w) = r
            .workers
            .iter_mut()
            .find(|w| w.generation == generation && w.worker == worker)
        {
            w.ended.get_or_insert(usage);
        }
    }
}

/// The calling thread's TID.
pub fn current_tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn seconds(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 * 1e-6
}

/// The calling thread's CPU time so far (`getrusage(RUSAGE_THREAD)`).
pub fn thread_usage() -> WorkerUsage {
    // SAFETY: an all-zero rusage is valid; getrusage only writes into it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    WorkerUsage {
        user_s: seconds(ru.ru_utime),
        system_s: seconds(ru.ru_stime),
        peak_rss_bytes: None,
    }
}

/// Records a thread worker's usage when the thread ends, however it ends.
pub(crate) struct ThreadEnd<'a> {
    pub(crate) registry: &'a WorkerRegistry,
    pub(crate) generation: u64,
    pub(crate) worker: usize,
}

impl Drop for ThreadEnd<'_> {
    fn drop(&mut self) {
        self.registry
            .ended(self.generation, self.worker, thread_usage());
    }
}

/// Reap child `pid` with `wait4`, which also returns what it used. `None`
/// when `block` is false and it is still running.
pub(crate) fn wait_with_usage(
    pid: u32,
    block: bool,
) -> std::io::Result<Option<(ExitStatus, WorkerUsage)>> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 only writes into it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let flags = if block { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: `status` and `ru` are valid and writable.
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, flags, &mut ru) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            return Ok(None);
        }
        let usage = WorkerUsage {
            user_s: seconds(ru.ru_utime),
            system_s: seconds(ru.ru_stime),
            // Linux reports ru_maxrss in kilobytes.
            peak_rss_bytes: Some(ru.ru_maxrss as u64 * 1024),
        };
        return Ok(Some((ExitStatus::from_raw(status), usage)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_pool_forgets_the_old_workers_and_their_late_reports() {
        let r = WorkerRegistry::default();
        let g1 = r.new_pool();
        r.started(g1, 1, WorkerKind::Threads, 11);
        r.started(g1, 0, WorkerKind::Threads, 10);
        assert_eq!(
            r.snapshot().iter().map(|w| w.id).collect::<Vec<_>>(),
            [10, 11]
        );
        let g2 = r.new_pool();
        assert!(g2 > g1 && r.snapshot().is_empty());
        // A late report of the old pool changes nothing.
        r.started(g1, 0, WorkerKind::Threads, 12);
        r.ended(g1, 0, WorkerUsage::default());
        assert!(r.snapshot().is_empty());
        r.started(g2, 0, WorkerKind::Processes, 99);
        let first = WorkerUsage {
            user_s: 1.0,
            ..WorkerUsage::default()
        };
        r.ended(g2, 0, first);
        r.ended(g2, 0, WorkerUsage::default());
        assert_eq!(r.snapshot()[0].ended, Some(first), "the first end counts");
    }

    fn spinning_loader(kind: WorkerKind, persistent: bool) -> crate::Loader {
        let config = crate::LoaderConfig {
            batch_size: 8,
            workers: 2,
            kind,
            persistent,
            ..crate::LoaderConfig::default()
        };
        let spec = crate::SourceSpec::Synthetic {
            samples: 64,
            features: 4,
            classes: 2,
            latency_us: 0,
            cpu_work_rounds: 20_000,
        };
        crate::Loader::new(config, spec).unwrap()
    }

    /// Real worker threads and processes: each is listed with its OS id
    /// while the epoch runs; a worker stopped at the epoch's end (not
    /// persistent) leaves what it used; persistent ones stay live; a new
    /// pool is a new generation.
    #[test]
    fn real_workers_are_listed_live_and_leave_their_usage_when_they_end() {
        for kind in [WorkerKind::Threads, WorkerKind::Processes] {
            for persistent in [false, true] {
                let mut loader = spinning_loader(kind, persistent);
                assert!(loader.worker_ids().is_empty());
                let mut generations = vec![];
                for epoch in 0..2 {
                    let mut it = loader.start_epoch(epoch).unwrap();
                    it.next_batch().unwrap().unwrap();
                    let live = loader.worker_ids();
                    assert_eq!(live.iter().map(|w| w.worker).collect::<Vec<_>>(), [0, 1]);
                    for w in &live {
                        assert_eq!(w.kind, kind);
                        let path = match kind {
                            WorkerKind::Threads => format!("/proc/self/task/{}", w.id),
                            WorkerKind::Processes => format!("/proc/{}", w.id),
                        };
                        assert!(std::path::Path::new(&path).exists(), "{path}");
                    }
                    generations.push(live[0].generation);
                    for b in it.by_ref() {
                        b.unwrap();
                    }
                    drop(it);
                    for w in loader.worker_ids() {
                        match (persistent, w.ended) {
                            (true, None) => {}
                            (false, Some(u)) => {
                                assert!(u.user_s + u.system_s > 0.0, "{kind:?}: {u:?}");
                                let rss = u.peak_rss_bytes;
                                assert_eq!(rss.is_some(), kind == WorkerKind::Processes);
                                assert!(rss.is_none_or(|b| b > 1 << 16));
                            }
                            (p, e) => panic!("{kind:?} persistent {p}: ended {e:?}"),
                        }
                    }
                }
                assert_eq!(generations[0] == generations[1], persistent, "{kind:?}");
                loader.shutdown();
                if persistent {
                    let left = loader.worker_ids();
                    assert!(left.iter().all(|w| w.ended.is_some()), "{left:?}");
                }
            }
        }
    }

    #[test]
    fn a_thread_sees_its_own_cpu_time_grow() {
        let before = thread_usage();
        let mut x = 1.0f64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box((x * 1.000_001).sqrt() + 1.0);
        }
        let after = thread_usage();
        assert!(after.user_s + after.system_s > before.user_s + before.system_s);
        assert_ne!(current_tid(), std::process::id());
    }
}
