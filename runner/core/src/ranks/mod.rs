//! Ranks: a run started by torchrun or Slurm's srun as one of several
//! processes. [`start`] reads the layout (`layout.rs`), takes this rank's
//! share of every epoch (`Shard`, as `DistributedSampler`), and meets the
//! other ranks at the c10d TCPStore barrier (`barrier.rs`); the training
//! loops call [`step_barrier`] / [`timed_step_barrier`] after every step and
//! [`slow_batch`] after every batch; the run writes `bundle.rank-R.json`.
//! For one process every call here is a no-op.
//!
//! A public namespace of the core (`stallscope_core::ranks`): its parts are
//! private and what other crates use is re-exported here.

mod barrier;
mod layout;
mod store;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use stallscope_bundle::{Failure, RankLayout};
use stallscope_loader::Shard;

pub use barrier::{Barrier, BarrierError, Place};
pub use layout::{LayoutError, MasterFlags, first_host, from_env};
pub use store::{KvStore, StoreError, StoreOpener, Waited};

use crate::measure::LoopError;
use crate::suite::RankKnobs;

/// Test hook: `R:K` makes rank R kill itself (SIGKILL) on arriving at its
/// K-th barrier, as a rank dying mid-epoch would.
pub const ABORT_ENV: &str = "STALLSCOPE_ABORT_RANK_AT";

/// This process's place among the ranks, for the whole run.
pub struct Ranks {
    pub layout: RankLayout,
    barrier: Option<Barrier>,
    hosts_store: bool,
    slow_delay: Option<Duration>,
    abort_at: Option<u64>,
    arrivals: AtomicU64,
}

static RANKS: OnceLock<Ranks> = OnceLock::new();

/// The other rank whose stop stopped this one, once seen.
static STOPPED_BY: OnceLock<u32> = OnceLock::new();

/// What stopped the run, for the interrupted configuration's message:
/// this process's Ctrl-C or SIGTERM, or another rank's.
pub fn stop_cause() -> String {
    match STOPPED_BY.get() {
        Some(r) => format!("Ctrl-C or SIGTERM on rank {r} (the ranks stop together)"),
        None => "Ctrl-C or SIGTERM".into(),
    }
}

/// Tell the other ranks this one stopped, before what it stops takes their
/// partner away (the peer harness in a collective). A no-op for one process.
pub fn announce_stop() {
    if let Some(b) = current().and_then(|r| r.barrier.as_ref()) {
        b.announce_stop();
    }
}

/// For loops that wait on something other than the barrier (the peer
/// harness): whether another rank stopped, which sets this process's stop
/// flag too. At most one store query per `barrier::SLICE`.
pub fn another_rank_stopped() -> bool {
    static LAST: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);
    {
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| t.elapsed() < barrier::SLICE) {
            return false;
        }
        *last = Some(Instant::now());
    }
    another_rank_stopped_now()
}

/// [`another_rank_stopped`] without the rate limit: for a harness that
/// failed, whose failure is another rank's stop when one was announced.
pub fn another_rank_stopped_now() -> bool {
    let Some(b) = current().and_then(|r| r.barrier.as_ref()) else {
        return false;
    };
    match b.stopped() {
        Some(r) if r != current().map_or(r, |x| x.layout.rank) => {
            let _ = STOPPED_BY.set(r);
            true
        }
        _ => false,
    }
}

/// The driver: this rank's current unit failed. The ranks whose peer
/// harnesses wait for this one's in their collective learn it within a
/// slice ([`unit_failed_elsewhere`]). Failures of the ranks' own
/// synchronisation are not announced (the others find those themselves).
/// A no-op for one process.
pub fn unit_failed(failure: &Failure) {
    let Some(b) = current().and_then(|r| r.barrier.as_ref()) else {
        return;
    };
    let message = match failure {
        Failure::CommTimeout { .. } | Failure::Interrupted { .. } => return,
        Failure::Error { message } | Failure::Panic { message } => message.clone(),
        other => format!("{other:?}"),
    };
    b.announce_failure(&message.chars().take(600).collect::<String>());
}

/// For a loop waiting on its peer harness: another rank's failure of this
/// unit, as the failure to record here. At most one store query per
/// `barrier::SLICE`; `None` for one process.
pub fn unit_failed_elsewhere(operation: &str) -> Option<Failure> {
    static LAST: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);
    let b = current().and_then(|r| r.barrier.as_ref())?;
    {
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| t.elapsed() < barrier::SLICE) {
            return None;
        }
        *last = Some(Instant::now());
    }
    b.failed_elsewhere(operation)
}

/// [`unit_failed_elsewhere`] without the rate limit: for a harness that
/// failed, whose failure is another rank's when one was announced.
pub fn unit_failed_elsewhere_now(operation: &str) -> Option<Failure> {
    current()?.barrier.as_ref()?.failed_elsewhere(operation)
}

/// The layout of this process from its environment and the flags.
pub fn detect(flags: &MasterFlags) -> Result<Option<RankLayout>, LayoutError> {
    let mut layout = from_env(&|k| std::env::var(k).ok().filter(|v| !v.is_empty()), flags)?;
    if let Some(l) = &mut layout {
        l.hostname = hostname();
    }
    Ok(layout)
}

/// This machine's host name (`gethostname`).
fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: a writable buffer of the length given.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    (rc == 0 && end > 0).then(|| String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// The ranked run's state, `None` for one process.
pub fn current() -> Option<&'static Ranks> {
    RANKS.get()
}

/// Take this rank's share, connect to the store (rank 0 hosts it unless
/// torchrun's agent does) and wait until every rank joined. Errors say
/// what to check (the address, the port, the suite's knobs).
pub fn start(
    mut layout: RankLayout,
    knobs: &RankKnobs,
    stop: &'static AtomicBool,
    open: &StoreOpener,
) -> Result<&'static Ranks, String> {
    let world = layout.world_size;
    let rank = layout.rank;
    if let Some(slow) = knobs.slow
        && slow.rank >= world
    {
        return Err(format!(
            "suite key slow_rank = {}: expected a rank below the world size {world}",
            slow.rank
        ));
    }
    layout.timeout_s = Some(knobs.timeout_s);
    let timeout = Duration::from_secs_f64(knobs.timeout_s);
    Shard {
        rank: rank as usize,
        world: world as usize,
    }
    .set_for_process();
    let agent_store = std::env::var("TORCHELASTIC_USE_AGENT_STORE").is_ok_and(|v| v == "True");
    let hosts_store = rank == 0 && !agent_store;
    let barrier = if world > 1 {
        // One namespace per run and restart: torchrun's agent store outlives
        // a restart, and its own keys live there too.
        let prefix = format!(
            "stallscope/{}/{}/",
            layout.job_id.as_deref().unwrap_or("run"),
            std::env::var("TORCHELASTIC_RESTART_COUNT").unwrap_or_else(|_| "0".into())
        );
        let at = barrier::Place {
            addr: &layout.master_addr,
            port: layout.master_port,
            server: hosts_store,
        };
        let b = Barrier::connect(open, at, rank, world, timeout, &prefix)?.watching(stop);
        b.arrive("the start of the run").map_err(|e| match e {
            BarrierError::Comm(f) => match *f {
                Failure::CommTimeout { message, .. } => {
                    format!("joining the other ranks: {message}")
                }
                other => format!("joining the other ranks: {other:?}"),
            },
            BarrierError::Stopped { by: None } => {
                "stopped (Ctrl-C or SIGTERM) while joining the other ranks".into()
            }
            BarrierError::Stopped { by: Some(r) } => {
                format!("rank {r} stopped (Ctrl-C or SIGTERM) while the ranks were joining")
            }
        })?;
        Some(b)
    } else {
        None
    };
    let abort_at = std::env::var(ABORT_ENV).ok().and_then(|v| {
        let (r, k) = v.split_once(':')?;
        (r.trim().parse::<u32>().ok()? == rank).then_some(k.trim().parse::<u64>().ok()?)
    });
    let ranks = Ranks {
        layout,
        barrier,
        hosts_store,
        slow_delay: knobs
            .slow
            .filter(|s| s.rank == rank && s.delay_ms > 0.0)
            .map(|s| Duration::from_secs_f64(s.delay_ms / 1000.0)),
        abort_at,
        arrivals: AtomicU64::new(0),
    };
    if RANKS.set(ranks).is_err() {
        return Err("the ranks were started twice in one process".into());
    }
    Ok(RANKS.get().expect("just set"))
}

impl Ranks {
    fn arrive(&self, step: u64, epoch: u32) -> Result<(), LoopError> {
        let Some(b) = &self.barrier else {
            return Ok(());
        };
        let n = self.arrivals.fetch_add(1, Ordering::Relaxed);
        if self.abort_at == Some(n) {
            eprintln!(
                "rank {}: {ABORT_ENV}: killing myself at barrier {n}",
                self.layout.rank
            );
            // SAFETY: sends SIGKILL to this process; nothing runs after it.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        b.arrive(&format!("step {step} of epoch {epoch}"))
            .map_err(|e| match e {
                BarrierError::Comm(f) => LoopError::Comm(f),
                BarrierError::Stopped { by } => {
                    if let Some(r) = by {
                        let _ = STOPPED_BY.set(r);
                    }
                    LoopError::Interrupted
                }
            })
    }
}

/// The driver enters the run's next unit (`experiment/configuration repeat
/// R`), in the same order on every rank; a no-op for one process. The
/// barrier keys carry it, so ranks that went out of step are found.
pub fn enter_unit(label: &str) {
    if let Some(b) = current().and_then(|r| r.barrier.as_ref()) {
        b.enter(label);
    }
}

/// Whether steps meet at a barrier (a ranked run of more than one rank).
pub fn barrier_active() -> bool {
    current().is_some_and(|r| r.barrier.is_some())
}

/// The note a ranked run's bundle carries about its whole-run barrier.
pub const SYNCED_BARRIER_NOTE: &str = "Ranks: in whole-run epochs each rank waits for its device     to finish the step before the per-step barrier, so the barrier lines up finished steps, not     queued work; that is one device synchronisation per step, which a training loop without a     per-step collective would not pay (on the CPU there is nothing to wait for).";

/// The per-step barrier of whole-run epochs (untimed); a no-op for one
/// process.
pub fn step_barrier(step: u64, epoch: u32) -> Result<(), LoopError> {
    match current() {
        Some(r) => r.arrive(step, epoch),
        None => Ok(()),
    }
}

/// The per-step barrier of diagnostic epochs: the nanoseconds spent in it
/// (the `comm` stage), `None` for one process (no comm series).
pub fn timed_step_barrier(step: u64, epoch: u32) -> Result<Option<u64>, LoopError> {
    let Some(r) = current().filter(|r| r.barrier.is_some()) else {
        return Ok(None);
    };
    let t = Instant::now();
    r.arrive(step, epoch)?;
    Ok(Some(t.elapsed().as_nanos() as u64))
}

/// After every batch the loop takes: the suite's `slow_rank_delay_ms` on
/// the rank it slows (counted in next-wait, as a slow loader would be).
pub fn slow_batch() {
    if let Some(d) = current().and_then(|r| r.slow_delay) {
        std::thread::sleep(d);
    }
}

/// The bundle path of this process: `X.json` for one process, `X.rank-R.json`
/// for rank R.
pub fn per_rank(path: &Path) -> PathBuf {
    match current() {
        Some(r) => rank_path(path, r.layout.rank),
        None => path.to_path_buf(),
    }
}

/// `dir/bundle.json` → `dir/bundle.rank-R.json`.
pub fn rank_path(path: &Path, rank: u32) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let ext = path
        .extension()
        .map_or_else(|| "json".into(), |e| e.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}.rank-{rank}.{ext}"))
}

/// The output folder when `--out` is not given: one per bundle for one
/// process; for ranks one the ranks share, `out/ranks-<job>` (the Slurm
/// job, torchrun's run id, else the master's address and port).
pub fn default_out_dir(bundle_id: &str) -> PathBuf {
    let Some(r) = current() else {
        return PathBuf::from("out").join(bundle_id);
    };
    let l = &r.layout;
    let job = l
        .job_id
        .clone()
        .unwrap_or_else(|| format!("{}-{}", l.master_addr, l.master_port));
    let safe: String = job
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from("out").join(format!("ranks-{safe}"))
}

/// At the end of the run: rank 0 keeps the store up until the other ranks
/// are done with it (at most the timeout).
pub fn finish() {
    if let Some(r) = current()
        && let Some(b) = &r.barrier
    {
        b.finish(r.hosts_store);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_paths_insert_the_rank_before_the_extension() {
        assert_eq!(
            rank_path(Path::new("out/x/bundle.json"), 3),
            Path::new("out/x/bundle.rank-3.json")
        );
        assert_eq!(rank_path(Path::new("b"), 0), Path::new("b.rank-0.json"));
    }
}
