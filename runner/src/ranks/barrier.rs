//! The per-step barrier of the ranks through libtorch's c10d `TCPStore`: at
//! barrier k every rank sets `b{k}/r{rank}` and waits for every rank's key;
//! on a timeout the keys that do not exist name the missing ranks. A rank
//! deletes its key of barrier k-1 once it passed barrier k (every rank has
//! then left k-1), so the store holds at most two keys per rank.
//!
//! A stop (Ctrl-C or SIGTERM) on one rank stops them all within a slice:
//! the stopped rank sets the key `stop` (its rank), and the ranks wait in
//! slices of [`SLICE`], looking for that key and their own stop flag in
//! between, instead of waiting out the timeout for a rank that has left.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use stallscope_bundle::Failure;

use crate::shim::store::{StoreError, TcpStore, Waited};

/// How long one wait lasts before the ranks look for a stop. A wait that
/// ends this way is cancelled in step by c10d (`CANCEL_WAIT`).
pub const SLICE: Duration = Duration::from_millis(250);

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
    store: TcpStore,
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
}

#[derive(Default)]
struct State {
    next: u64,
    /// The first failure: every later barrier fails at once with it.
    broken: Option<Failure>,
}

impl Barrier {
    /// Host the store (`server`) or connect to it at `addr:port`, retrying
    /// until `timeout`.
    pub fn connect(
        addr: &str,
        port: u16,
        server: bool,
        rank: u32,
        world: u32,
        timeout: Duration,
        prefix: &str,
    ) -> Result<Self, String> {
        let store = TcpStore::open(addr, port, server, timeout).map_err(|e| {
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
        Ok(Barrier {
            store,
            rank,
            world,
            timeout,
            prefix: prefix.into(),
            at: format!("{addr}:{port}"),
            state: Mutex::new(State::default()),
            lost: Mutex::new(None),
            stop: None,
            announced: AtomicBool::new(false),
        })
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

    fn key(&self, k: u64, rank: u32) -> String {
        format!("{}b{k}/r{rank}", self.prefix)
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
    /// within a [`SLICE`] as [`BarrierError::Stopped`].
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
        let result = self.arrive_at(k, operation);
        if let Err(BarrierError::Comm(f)) = &result {
            state.broken = Some((**f).clone());
        }
        result
    }

    fn arrive_at(&self, k: u64, operation: &str) -> Result<(), BarrierError> {
        let operation = format!("barrier {k} at {operation}");
        let gone = |e: StoreError| BarrierError::Comm(Box::new(self.gone(&operation, e)));
        let set = self.store.set(&self.key(k, self.rank), "1");
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
        let keys: Vec<String> = (0..self.world).map(|r| self.key(k, r)).collect();
        let deadline = Instant::now() + self.timeout;
        let waited = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.store.wait(&keys, left.min(SLICE)).map_err(gone)? {
                Waited::TimedOut if left > SLICE => {
                    if let Some(by) = self.stopped() {
                        return Err(self.stop_error(by));
                    }
                }
                w => break w,
            }
        };
        match waited {
            Waited::Ready => {
                if k > 0 {
                    // Every rank left barrier k-1 once all arrived at k. A
                    // store gone since the wait is reported by the next
                    // barrier's first operation, at the place it stops.
                    if let Err(e) = self.store.delete(&self.key(k - 1, self.rank)) {
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
                    if !self.store.exists(&self.key(k, r)).map_err(gone)? {
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
    /// Skipped after a comm failure.
    pub fn finish(&self, hosts_store: bool) {
        if self.broken().is_some() {
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
mod tests {
    use super::*;

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[test]
    fn a_taken_port_is_a_message_saying_what_to_check() {
        let taken = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let t = Duration::from_secs(2);
        let e = Barrier::connect("127.0.0.1", port, true, 0, 2, t, "t/")
            .err()
            .unwrap();
        assert!(
            e.starts_with(&format!(
                "rank 0: cannot host the ranks' store on port {port} ("
            )),
            "{e}"
        );
        assert!(
            e.ends_with("or pick another with MASTER_PORT or --master-port"),
            "{e}"
        );
    }

    /// Three ranks as threads over a real TCPStore pass many barriers; then
    /// rank 2 stops coming and the others time out naming it, and fail at
    /// once afterwards.
    #[test]
    fn ranks_meet_and_a_missing_rank_is_named() {
        let port = free_port();
        let t = Duration::from_millis(1500);
        let server = Barrier::connect("127.0.0.1", port, true, 0, 3, t, "t/").unwrap();
        let others: Vec<Barrier> = (1..3)
            .map(|r| Barrier::connect("127.0.0.1", port, false, r, 3, t, "t/").unwrap())
            .collect();
        let all: Vec<&Barrier> = std::iter::once(&server).chain(others.iter()).collect();
        std::thread::scope(|s| {
            for b in &all {
                s.spawn(move || {
                    for step in 0..50 {
                        b.arrive(&format!("step {step}")).unwrap();
                    }
                });
            }
        });
        // Old keys are deleted: only barrier 49's remain.
        for r in 0..3 {
            assert!(!server.store.exists(&server.key(48, r)).unwrap());
            assert!(server.store.exists(&server.key(49, r)).unwrap());
        }
        let results: Vec<Result<(), BarrierError>> = std::thread::scope(|s| {
            let h: Vec<_> = all[..2]
                .iter()
                .map(|b| s.spawn(move || b.arrive("step 0 of epoch 1")))
                .collect();
            h.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in results {
            let Err(BarrierError::Comm(f)) = r else {
                panic!("expected a comm timeout, got {r:?}")
            };
            let Failure::CommTimeout {
                operation,
                missing_ranks,
                timeout_s,
                ..
            } = *f
            else {
                panic!("expected a comm timeout, got {f:?}")
            };
            assert_eq!(operation, "barrier 50 at step 0 of epoch 1");
            assert_eq!(missing_ranks, vec![2]);
            assert_eq!(timeout_s, Some(1.5));
        }
        let again = server.arrive("step 1 of epoch 1").unwrap_err();
        assert!(matches!(again, BarrierError::Comm(ref f) if matches!(**f,
                Failure::CommTimeout { ref missing_ranks, .. } if missing_ranks == &[2])));
    }

    /// Over generated worlds and stopping ranks: one rank's stop (its
    /// Ctrl-C flag, set while the others wait or before it arrives) ends
    /// every other rank's wait within a few slices, naming it, with a
    /// timeout far longer; the others' flags are set too.
    #[test]
    fn one_ranks_stop_stops_the_others_within_a_slice() {
        let mut rng = stallscope_loader::rng::Rng::new(11);
        for case in 0..4 {
            let world = 2 + rng.below(3) as u32;
            let stopper = rng.below(u64::from(world)) as u32;
            let steps = rng.below(5);
            let port = free_port();
            let t = Duration::from_secs(60);
            let flags: Vec<&'static AtomicBool> = (0..world)
                .map(|_| &*Box::leak(Box::new(AtomicBool::new(false))))
                .collect();
            let server = Barrier::connect("127.0.0.1", port, true, 0, world, t, "s/")
                .unwrap()
                .watching(flags[0]);
            let others: Vec<Barrier> = (1..world)
                .map(|r| {
                    Barrier::connect("127.0.0.1", port, false, r, world, t, "s/")
                        .unwrap()
                        .watching(flags[r as usize])
                })
                .collect();
            let all: Vec<&Barrier> = std::iter::once(&server).chain(others.iter()).collect();
            let started = Instant::now();
            let ends: Vec<(u32, Result<(), BarrierError>)> = std::thread::scope(|s| {
                let h: Vec<_> = all
                    .iter()
                    .enumerate()
                    .map(|(r, b)| {
                        let flag = flags[r];
                        s.spawn(move || {
                            for step in 0.. {
                                if r as u32 == stopper && step == steps {
                                    // Ctrl-C between steps, then one more arrival.
                                    flag.store(true, Ordering::SeqCst);
                                }
                                if let Err(e) = b.arrive(&format!("step {step}")) {
                                    return (r as u32, Err(e));
                                }
                            }
                            unreachable!()
                        })
                    })
                    .collect();
                h.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let took = started.elapsed();
            assert!(took < 20 * SLICE, "case {case}: took {took:?}");
            for (r, end) in ends {
                let want = (r != stopper).then_some(stopper);
                assert!(
                    matches!(end, Err(BarrierError::Stopped { by }) if by == want),
                    "case {case}: rank {r} of {world} (stopper {stopper}): {end:?}"
                );
                assert!(
                    flags[r as usize].load(Ordering::SeqCst),
                    "case {case}: rank {r}"
                );
            }
        }
    }
}
