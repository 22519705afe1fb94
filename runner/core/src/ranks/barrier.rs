//! The per-step barrier of the ranks through a key-value store (libtorch's
//! c10d `TCPStore` in a run; [`KvStore`]): at barrier k every rank sets its
//! arrival key `b{k}/r{rank}` and adds one to the counter `b{k}/n`; the rank
//! whose add reaches the world size sets `b{k}/done`, the one key every rank
//! waits on. So a step costs the store O(world) operations in all, as torch
//! elastic's counter barrier does, not a wait on every rank's key by every
//! rank (O(world²)). On a timeout the arrival keys that do not exist name
//! the missing ranks. A rank deletes its arrival key of barrier k-1 once it
//! passed barrier k (every rank has then left k-1), and rank 0 deletes k-1's
//! counter and done keys, so the store holds at most two barriers' keys.
//!
//! Every unit (configuration and repeat) the driver enters moves each rank
//! to the next position, published as `place/r{rank}` = `{pos} {label}`,
//! and the barrier keys carry it (`u{pos}.{hash}/b{k}/r{rank}`), so ranks in
//! different units never pair up. A rank whose configuration failed on it
//! alone (an out-of-memory error on one GPU) moves on early: the ranks it
//! left find it ahead of them while they wait, record that the ranks went
//! out of step, and tell the others through the key `outofstep`.
//!
//! A stop (Ctrl-C or SIGTERM) on one rank stops them all within a slice:
//! the stopped rank sets the key `stop` (its rank), and the ranks wait in
//! slices of [`SLICE`], looking for that key and their own stop flag in
//! between, instead of waiting out the timeout for a rank that has left.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use stallscope_bundle::Failure;

#[cfg(test)]
use super::store::MemStore;
pub use super::store::{KvStore, StoreError, StoreOpener, Waited};

/// How long one wait lasts before the ranks look for a stop. A wait that
/// ends this way is cancelled in step by c10d (`CANCEL_WAIT`).
pub const SLICE: Duration = Duration::from_millis(250);

/// How many ranks rank 0 looks at per slice for one out of step.
const LOOK_PER_SLICE: u32 = 32;

/// Where the store is: rank 0 hosts it (`server`) unless a launcher does.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub addr: &'a str,
    pub port: u16,
    pub server: bool,
}

/// Why a barrier let a rank go without every rank arriving.
#[derive(Debug, Clone)]
pub enum BarrierError {
    /// A rank missing past the timeout, or the store gone.
    Comm(Box<Failure>),
    /// A stop: this rank's own (`by` = None) or another rank's.
    Stopped { by: Option<u32> },
}

/// A barrier among `world` ranks over one store connection.
pub struct Barrier {
    store: Box<dyn KvStore>,
    rank: u32,
    world: u32,
    timeout: Duration,
    /// Key prefix (one namespace per run: torchrun's agent store is shared).
    prefix: String,
    /// Where the store is, for messages.
    at: String,
    state: Mutex<State>,
    /// A failed delete of the previous barrier's key, kept for the message
    /// of the next operation (which fails too when the store is gone).
    lost: Mutex<Option<StoreError>>,
    /// This process's stop flag (Ctrl-C, SIGTERM), when it has one.
    stop: Option<&'static AtomicBool>,
    /// The stop key was set (by this rank or seen from another).
    announced: AtomicBool,
    /// Rank 0: where its next look for ranks out of step starts.
    cursor: AtomicU32,
}

#[derive(Default)]
struct State {
    next: u64,
    /// The first failure: every later barrier fails at once with it.
    broken: Option<Failure>,
    /// Where this rank is in the run (0: the start, before any unit).
    unit: Unit,
    /// The previous barrier's key prefix (`…/b{k-1}`): this rank's arrival
    /// key there (and rank 0's counter and done keys) are deleted once it
    /// passed the next one.
    previous: Option<String>,
}

/// A unit's position in the run and its label, the same on every rank while
/// they are in step; `tag` names it in the barrier keys and in comparisons.
#[derive(Debug, Clone, PartialEq)]
struct Unit {
    pos: u64,
    label: String,
    tag: String,
}

impl Default for Unit {
    fn default() -> Self {
        Unit::new(0, "")
    }
}

impl Unit {
    fn new(pos: u64, label: &str) -> Unit {
        // FNV-1a: short, stable across processes and builds.
        let hash = label.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        Unit {
            pos,
            label: label.into(),
            tag: format!("u{pos}.{hash:08x}"),
        }
    }

    /// What `place/r{rank}` holds: `{pos} {label}`.
    fn place(&self) -> String {
        format!("{} {}", self.pos, self.label)
    }

    fn parse(value: &str) -> Option<Unit> {
        let (pos, label) = value.split_once(' ').unwrap_or((value, ""));
        Some(Unit::new(pos.parse().ok()?, label))
    }

    fn describe(&self) -> String {
        if self.pos == 0 {
            "the start of the run".into()
        } else {
            format!("unit {} ({})", self.pos, self.label)
        }
    }
}

impl Barrier {
    /// Host the store (`server`) or connect to it at `addr:port` through
    /// `open`, retrying until `timeout`.
    pub fn connect(
        open: &StoreOpener,
        at: Place,
        rank: u32,
        world: u32,
        timeout: Duration,
        prefix: &str,
    ) -> Result<Self, String> {
        let Place { addr, port, server } = at;
        let store = open(addr, port, server, timeout).map_err(|e| {
            if server {
                format!(
                    "rank {rank}: cannot host the ranks' store on port {port} ({}); check that \
                     the port is free on this node, or pick another with MASTER_PORT or \
                     --master-port",
                    e.message
                )
            } else {
                format!(
                    "rank {rank}: cannot reach the rank-0 store at {addr}:{port} within {:.0} s \
                     ({}); check that MASTER_ADDR (or --master-addr) names rank 0's node, that \
                     MASTER_PORT (or --master-port) is the same on every rank, that rank 0 \
                     runs, and that no firewall blocks the port",
                    timeout.as_secs_f64(),
                    e.message
                )
            }
        })?;
        Ok(Self::over(
            store,
            rank,
            world,
            timeout,
            prefix,
            format!("{addr}:{port}"),
        ))
    }

    /// A barrier over a store already open (`at` names it in messages).
    pub fn over(
        store: Box<dyn KvStore>,
        rank: u32,
        world: u32,
        timeout: Duration,
        prefix: &str,
        at: String,
    ) -> Self {
        Barrier {
            store,
            rank,
            world,
            timeout,
            prefix: prefix.into(),
            at,
            state: Mutex::new(State::default()),
            lost: Mutex::new(None),
            stop: None,
            announced: AtomicBool::new(false),
            cursor: AtomicU32::new(0),
        }
    }

    /// Watch `stop` (the run's Ctrl-C / SIGTERM flag) while waiting; it is
    /// also set when another rank's stop is seen.
    pub fn watching(mut self, stop: &'static AtomicBool) -> Self {
        self.stop = Some(stop);
        self
    }

    fn stop_key(&self) -> String {
        format!("{}stop", self.prefix)
    }

    /// Tell the other ranks this one stopped (once; best effort: a store
    /// gone is the others' failure to report).
    pub fn announce_stop(&self) {
        if !self.announced.swap(true, Ordering::SeqCst)
            && !self.store.exists(&self.stop_key()).unwrap_or(true)
        {
            let _ = self.store.set(&self.stop_key(), &self.rank.to_string());
        }
    }

    /// The rank that stopped, when one did: this one (its flag is set; the
    /// others are told), or another seen in the store, which sets this
    /// process's flag too.
    pub fn stopped(&self) -> Option<u32> {
        if self.stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            self.announce_stop();
            return Some(self.rank);
        }
        let key = self.stop_key();
        if !self.store.exists(&key).unwrap_or(false) {
            return None;
        }
        let by = self.store.get(&key).ok()?.trim().parse().ok()?;
        self.announced.store(true, Ordering::SeqCst);
        if let Some(s) = self.stop {
            s.store(true, Ordering::SeqCst);
        }
        Some(by)
    }

    fn stop_error(&self, by: u32) -> BarrierError {
        BarrierError::Stopped {
            by: (by != self.rank).then_some(by),
        }
    }

    /// Barrier k's keys share this prefix: `…/r{rank}` (arrival), `…/n`
    /// (the counter) and `…/done`.
    fn barrier_key(&self, unit: &Unit, k: u64) -> String {
        format!("{}{}/b{k}", self.prefix, unit.tag)
    }

    fn key(&self, unit: &Unit, k: u64, rank: u32) -> String {
        format!("{}/r{rank}", self.barrier_key(unit, k))
    }

    fn place_key(&self, rank: u32) -> String {
        format!("{}place/r{rank}", self.prefix)
    }

    fn out_of_step_key(&self) -> String {
        format!("{}outofstep", self.prefix)
    }

    /// Move to the run's next unit (`label`: experiment, configuration and
    /// repeat), on every rank in the same order, and say so in the store.
    /// A store gone is reported by the next barrier.
    pub fn enter(&self, label: &str) {
        let mut state = self.state.lock().expect("barrier state");
        if state.broken.is_some() {
            return;
        }
        state.unit = Unit::new(state.unit.pos + 1, label);
        if let Err(e) = self
            .store
            .set(&self.place_key(self.rank), &state.unit.place())
        {
            *self.lost.lock().expect("lost") = Some(e);
        }
    }

    fn failed_key(&self, unit: &Unit) -> String {
        format!("{}failed/{}", self.prefix, unit.tag)
    }

    /// This rank's run of its current unit failed (a peer harness's error):
    /// say so, first finding kept, for the ranks whose harnesses wait for
    /// this one in their collective. Best effort: a store gone is reported
    /// by the next barrier.
    pub fn announce_failure(&self, message: &str) {
        let unit = self.state.lock().expect("barrier state").unit.clone();
        let key = self.failed_key(&unit);
        if !self.store.exists(&key).unwrap_or(true) {
            let _ = self.store.set(&key, &format!("{}\t{message}", self.rank));
        }
    }

    /// Whether another rank's run of this rank's current unit failed: the
    /// failure to record here (this rank's harness waits for that one in
    /// its collective, and would until the process group's timeout). The
    /// ranks stay in step: the next unit meets again.
    pub fn failed_elsewhere(&self, operation: &str) -> Option<Failure> {
        let unit = self.state.lock().expect("barrier state").unit.clone();
        let key = self.failed_key(&unit);
        if !self.store.exists(&key).ok()? {
            return None;
        }
        let value = self.store.get(&key).ok()?;
        let (by, message) = value.split_once('\t')?;
        let by: u32 = by.parse().ok()?;
        (by != self.rank).then(|| Failure::CommTimeout {
            operation: operation.into(),
            timeout_s: None,
            missing_ranks: vec![by],
            message: format!(
                "the ranks went out of step: rank {by}'s run of {} failed ({message}); this \
                 rank's harness waited for it in its collective and was stopped, instead of \
                 waiting out the process group's timeout. The next configurations meet again",
                unit.describe()
            ),
        })
    }

    /// Where `rank` said it is (the start of the run before its first unit).
    fn place_of(&self, rank: u32) -> Result<Unit, StoreError> {
        let key = self.place_key(rank);
        if !self.store.exists(&key)? {
            return Ok(Unit::default());
        }
        let value = self.store.get(&key)?;
        Ok(Unit::parse(&value).unwrap_or_default())
    }

    /// While waiting at barrier `k` of `unit`: a rank that left this unit
    /// without arriving (it is ahead, or in another unit at the same
    /// position), or another rank's finding of that. Rank 0 looks at the
    /// others, [`LOOK_PER_SLICE`] at a time, the others at rank 0, so the
    /// store's load stays small for a large world; whichever rank finds it
    /// tells the rest.
    fn out_of_step(
        &self,
        unit: &Unit,
        k: u64,
        operation: &str,
    ) -> Result<Option<Failure>, StoreError> {
        let failure = |other: u32, message: String| Failure::CommTimeout {
            operation: operation.into(),
            timeout_s: None,
            missing_ranks: vec![other],
            message,
        };
        let found = self.out_of_step_key();
        if self.store.exists(&found)? {
            let value = self.store.get(&found)?;
            let (by, message) = value.split_once('\t').unwrap_or(("0", &value));
            let by = by.parse().unwrap_or(0);
            let message = format!("the ranks went out of step (rank {by} found it): {message}");
            return Ok(Some(failure(by, message)));
        }
        let look_at: Vec<u32> = if self.rank == 0 {
            // A few ranks per slice, in turn: a wait ends late by at most
            // these store calls, whatever the world.
            let others = self.world - 1;
            let from = self.cursor.fetch_add(LOOK_PER_SLICE, Ordering::Relaxed);
            (0..LOOK_PER_SLICE.min(others))
                .map(|i| 1 + (from + i) % others)
                .collect()
        } else {
            vec![0]
        };
        for r in look_at {
            if self.store.exists(&self.key(unit, k, r))? {
                continue;
            }
            let theirs = self.place_of(r)?;
            let diverged =
                theirs.pos > unit.pos || (theirs.pos == unit.pos && theirs.tag != unit.tag);
            // A rank sets its key before it can move on: arrived after all?
            if !diverged || self.store.exists(&self.key(unit, k, r))? {
                continue;
            }
            let found_here = format!(
                "rank {} waited at {operation} in {} while rank {r} was at {} and never \
                 arrived there. A configuration failed on some ranks only (an out-of-memory \
                 error on one GPU, say; each rank's bundle has its failure), so the ranks \
                 cannot meet again in this run; the configurations measured before are kept",
                self.rank,
                unit.describe(),
                theirs.describe()
            );
            if !self.store.exists(&found)? {
                self.store
                    .set(&found, &format!("{}\t{found_here}", self.rank))?;
            }
            let message = format!("the ranks went out of step: {found_here}");
            return Ok(Some(failure(r, message)));
        }
        Ok(None)
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The failure that broke the barrier, if one did.
    pub fn broken(&self) -> Option<Failure> {
        self.state.lock().expect("barrier state").broken.clone()
    }

    /// Wait until every rank arrived at this barrier; `operation` names the
    /// place (`step 41 of epoch 1`). After a failure every later call
    /// returns it at once, so the remaining units end instead of waiting.
    /// A stop (this rank's flag, or another rank's key) ends the wait
    /// within a `SLICE` as [`BarrierError::Stopped`].
    pub fn arrive(&self, operation: &str) -> Result<(), BarrierError> {
        let mut state = self.state.lock().expect("barrier state");
        if let Some(f) = &state.broken {
            return Err(BarrierError::Comm(Box::new(earlier(f, operation))));
        }
        if self.stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            self.announce_stop();
            return Err(BarrierError::Stopped { by: None });
        }
        let k = state.next;
        state.next += 1;
        let result = self.arrive_at(&mut state, k, operation);
        if let Err(BarrierError::Comm(f)) = &result {
            state.broken = Some((**f).clone());
        }
        result
    }

    fn arrive_at(&self, state: &mut State, k: u64, operation: &str) -> Result<(), BarrierError> {
        let operation = format!("barrier {k} at {operation}");
        let gone = |e: StoreError| BarrierError::Comm(Box::new(self.gone(&operation, e)));
        let unit = state.unit.clone();
        let barrier = self.barrier_key(&unit, k);
        let set = self.store.set(&format!("{barrier}/r{}", self.rank), "1");
        if let (Err(e), Some(before)) = (&set, self.lost.lock().expect("lost").take()) {
            return Err(gone(StoreError {
                call: e.call,
                message: format!(
                    "{}; deleting the previous barrier's key: {}",
                    e.message, before.message
                ),
            }));
        }
        set.map_err(gone)?;
        let done = format!("{barrier}/done");
        let arrived = self.store.add(&format!("{barrier}/n"), 1).map_err(gone)?;
        if arrived == i64::from(self.world) {
            self.store.set(&done, "1").map_err(gone)?;
        }
        let keys = [done];
        let deadline = Instant::now() + self.timeout;
        let waited = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.store.wait(&keys, left.min(SLICE)).map_err(gone)? {
                Waited::TimedOut if left > SLICE => {
                    if let Some(by) = self.stopped() {
                        return Err(self.stop_error(by));
                    }
                    if let Some(f) = self.out_of_step(&unit, k, &operation).map_err(gone)? {
                        return Err(BarrierError::Comm(Box::new(f)));
                    }
                }
                w => break w,
            }
        };
        match waited {
            Waited::Ready => {
                if let Some(previous) = state.previous.replace(barrier) {
                    // Every rank left barrier k-1 once all arrived at k. A
                    // store gone since the wait is reported by the next
                    // barrier's first operation, at the place it stops.
                    if let Err(e) = self.forget(&previous) {
                        *self.lost.lock().expect("lost") = Some(e);
                    }
                }
                Ok(())
            }
            Waited::TimedOut => {
                if let Some(by) = self.stopped() {
                    return Err(self.stop_error(by));
                }
                let mut missing = Vec::new();
                for r in 0..self.world {
                    if !self.store.exists(&self.key(&unit, k, r)).map_err(gone)? {
                        missing.push(r);
                    }
                }
                Err(BarrierError::Comm(Box::new(Failure::CommTimeout {
                    message: format!(
                        "rank {} waited {:.1} s at {operation} for rank(s) {}: they died, \
                         stalled, or ran a different suite; the configurations measured \
                         before are kept",
                        self.rank,
                        self.timeout.as_secs_f64(),
                        list(&missing)
                    ),
                    operation,
                    timeout_s: Some(self.timeout.as_secs_f64()),
                    missing_ranks: missing,
                })))
            }
        }
    }

    /// Delete this rank's arrival key of barrier k-1; rank 0 deletes that
    /// barrier's counter and done key too.
    fn forget(&self, previous: &str) -> Result<(), StoreError> {
        self.store.delete(&format!("{previous}/r{}", self.rank))?;
        if self.rank == 0 {
            self.store.delete(&format!("{previous}/n"))?;
            self.store.delete(&format!("{previous}/done"))?;
        }
        Ok(())
    }

    /// The store itself went away (rank 0, which hosts it, died).
    fn gone(&self, operation: &str, e: StoreError) -> Failure {
        Failure::CommTimeout {
            operation: operation.into(),
            timeout_s: Some(self.timeout.as_secs_f64()),
            missing_ranks: if self.rank == 0 { Vec::new() } else { vec![0] },
            message: format!(
                "rank {}: the ranks' store at {} stopped answering at {operation} ({}); rank 0 \
                 hosts it and has probably died",
                self.rank, self.at, e.message
            ),
        }
    }

    /// At the end of the run: rank 0 hosts the store, so it waits (at most
    /// the timeout) until every other rank said it is done with it; the
    /// others say so and return. A stopped rank first tells the others.
    /// Skipped after a comm failure other than the ranks going out of step.
    pub fn finish(&self, hosts_store: bool) {
        // Ranks out of step are all alive and may still read the finding
        // from the store: rank 0 keeps it up for them.
        if self.broken().is_some_and(|f| !is_out_of_step(&f)) {
            return;
        }
        if self.stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            self.announce_stop();
        }
        let done = |r: u32| format!("{}exit/r{r}", self.prefix);
        if hosts_store {
            let keys: Vec<String> = (1..self.world).map(done).collect();
            let _ = self.store.wait(&keys, self.timeout);
        } else {
            let _ = self.store.set(&done(self.rank), "1");
        }
    }
}

/// Whether a barrier failure is the ranks going out of step (the only
/// comm failure that is not a timeout nor a store gone: no `timeout_s`).
fn is_out_of_step(f: &Failure) -> bool {
    matches!(
        f,
        Failure::CommTimeout {
            timeout_s: None,
            ..
        }
    )
}

/// A barrier after the one that failed: failed at once, naming the first.
fn earlier(first: &Failure, operation: &str) -> Failure {
    match first {
        Failure::CommTimeout {
            operation: op,
            timeout_s,
            missing_ranks,
            ..
        } => Failure::CommTimeout {
            operation: format!("{operation} (not waited for)"),
            timeout_s: *timeout_s,
            missing_ranks: missing_ranks.clone(),
            message: format!(
                "not run: the ranks lost each other at {op} earlier in this run (rank(s) {} \
                 missing)",
                list(missing_ranks)
            ),
        },
        other => other.clone(),
    }
}

fn list(ranks: &[u32]) -> String {
    if ranks.is_empty() {
        return "none".into();
    }
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
