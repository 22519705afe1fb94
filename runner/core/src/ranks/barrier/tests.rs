//! The barrier, its ranks as threads over one in-memory store: meeting, a
//! missing rank, a stop, ranks that went out of step, and the store
//! operations a step costs. (`stallscope-torch` runs it over c10d's
//! TCPStore too.)

use std::sync::Arc;

use super::*;

/// `world` ranks' barriers over one store.
type Ranks = fn(u32, Duration, &str) -> Vec<Barrier>;

/// Over one in-memory store.
fn mem_ranks(world: u32, t: Duration, prefix: &str) -> Vec<Barrier> {
    let store = Arc::new(MemStore::default());
    (0..world)
        .map(|r| {
            Barrier::over(
                Box::new(Arc::clone(&store)),
                r,
                world,
                t,
                prefix,
                "memory".into(),
            )
        })
        .collect()
}

/// The stores the barrier's tests run over here (the libtorch back end runs
/// the same barrier over c10d's TCPStore in its own tests and end to end).
const STORES: [(&str, Ranks); 1] = [("memory", mem_ranks)];

/// Three ranks as threads over a real TCPStore pass many barriers; then
/// rank 2 stops coming and the others time out naming it, and fail at
/// once afterwards.
#[test]
fn ranks_meet_and_a_missing_rank_is_named() {
    for (_, ranks) in STORES {
        meet_and_name_the_missing(ranks);
    }
}

fn meet_and_name_the_missing(ranks: Ranks) {
    let t = Duration::from_millis(1500);
    let owned = ranks(3, t, "t/");
    let server = &owned[0];
    let all: Vec<&Barrier> = owned.iter().collect();
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
        assert!(
            !server
                .store
                .exists(&server.key(&Unit::default(), 48, r))
                .unwrap()
        );
        assert!(
            server
                .store
                .exists(&server.key(&Unit::default(), 49, r))
                .unwrap()
        );
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
    let mut rng = stallscope_loader::Rng::new(11);
    for case in 0..4 {
        let world = 2 + rng.below(3) as u32;
        let stopper = rng.below(u64::from(world)) as u32;
        let steps = rng.below(5);
        let t = Duration::from_secs(60);
        let flags: Vec<&'static AtomicBool> = (0..world)
            .map(|_| &*Box::leak(Box::new(AtomicBool::new(false))))
            .collect();
        let ranks = STORES[case % STORES.len()].1;
        let owned: Vec<Barrier> = ranks(world, t, "s/")
            .into_iter()
            .zip(&flags)
            .map(|(b, f)| b.watching(f))
            .collect();
        let all: Vec<&Barrier> = owned.iter().collect();
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

/// Ranks that enter the same units in the same order meet across unit
/// changes; the keys of a passed barrier are deleted whatever unit it was in.
#[test]
fn ranks_in_step_meet_across_units() {
    for (_, ranks) in STORES {
        meet_across_units(ranks);
    }
}

fn meet_across_units(ranks: Ranks) {
    let t = Duration::from_secs(30);
    let all = ranks(3, t, "i/");
    std::thread::scope(|s| {
        for b in &all {
            s.spawn(move || {
                for unit in ["e/a repeat 0", "e/b repeat 0", "e/a repeat 1"] {
                    b.enter(unit);
                    for step in 0..5 {
                        b.arrive(&format!("step {step}")).unwrap();
                    }
                }
            });
        }
    });
    let last = Unit::new(3, "e/a repeat 1");
    for r in 0..3 {
        assert!(!all[0].store.exists(&all[0].key(&last, 13, r)).unwrap());
        assert!(all[0].store.exists(&all[0].key(&last, 14, r)).unwrap());
    }
}

/// Over generated worlds (and one larger than rank 0 looks at in a slice):
/// one rank leaves a unit early (its configuration
/// failed on it alone) and enters the next; or one rank is in another
/// configuration at the same position. Every rank's wait ends within a few
/// slices, far before the timeout, with a failure that names the rank out
/// of step and what each was at; the barrier then stays broken.
#[test]
fn ranks_out_of_step_are_found_within_a_few_slices() {
    let mut rng = stallscope_loader::Rng::new(23);
    for case in 0..7 {
        let mut world = 2 + rng.below(3) as u32;
        let mut leaver = rng.below(u64::from(world)) as u32;
        if case == 6 {
            // More ranks than rank 0 looks at in one slice; the leaver last.
            (world, leaver) = (LOOK_PER_SLICE + 5, LOOK_PER_SLICE + 4);
        }
        let after = rng.below(4);
        // Odd cases: the leaver runs another configuration in the same slot.
        let same_slot = case % 2 == 1;
        let t = Duration::from_secs(60);
        let all = STORES[(case / 2) % STORES.len()].1(world, t, "o/");
        let started = Instant::now();
        let ends: Vec<(u32, BarrierError)> = std::thread::scope(|s| {
            let h: Vec<_> = all
                .iter()
                .enumerate()
                .map(|(r, b)| {
                    s.spawn(move || {
                        let r = r as u32;
                        b.enter("sweep/b50 repeat 0");
                        for step in 0..2 {
                            b.arrive(&format!("step {step}")).unwrap();
                        }
                        if r == leaver && same_slot {
                            b.enter("probe/b512 repeat 0");
                        } else {
                            b.enter("sweep/b64 repeat 0");
                        }
                        for step in 0.. {
                            if r == leaver && !same_slot && step == after {
                                // Its configuration failed here: on to the next.
                                b.enter("sweep/b128 repeat 0");
                            }
                            if let Err(e) = b.arrive(&format!("step {step}")) {
                                return (r, e);
                            }
                        }
                        unreachable!()
                    })
                })
                .collect();
            h.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let took = started.elapsed();
        eprintln!("case {case}: world {world}, found in {took:?}");
        // Far below the 60 s timeout, with room for a loaded machine.
        assert!(took < 40 * SLICE, "case {case}: took {took:?}");
        for (r, e) in ends {
            let BarrierError::Comm(f) = e else {
                panic!("case {case} rank {r}: {e:?}")
            };
            let Failure::CommTimeout {
                timeout_s,
                missing_ranks,
                message,
                ..
            } = &*f
            else {
                panic!("case {case} rank {r}: {f:?}")
            };
            assert_eq!(*timeout_s, None, "case {case} rank {r}: not a timeout");
            assert_eq!(missing_ranks.len(), 1, "case {case} rank {r}: {message}");
            assert!(
                message.contains("out of step") && message.contains("never arrived there"),
                "case {case} rank {r}: {message}"
            );
            let other = if same_slot {
                "probe/b512 repeat 0"
            } else {
                "sweep/b128 repeat 0"
            };
            let (mine, theirs) = ("sweep/b64 repeat 0", other);
            assert!(
                message.contains(mine) && message.contains(theirs),
                "case {case} rank {r}: {message}"
            );
            assert!(all[r as usize].broken().is_some());
        }
    }
}

/// The store operations one step's barrier costs grow with the world, not
/// with its square (counted, not timed): at worlds 2 to 64, every rank's
/// keys touched per step stay within a constant, once the start is passed.
#[test]
fn a_step_costs_the_store_o_world_operations() {
    for world in [2u32, 3, 4, 8, 16, 32, 64] {
        let store = Arc::new(MemStore::default());
        let t = Duration::from_secs(60);
        let all: Vec<Barrier> = (0..world)
            .map(|r| {
                Barrier::over(
                    Box::new(Arc::clone(&store)),
                    r,
                    world,
                    t,
                    "c/",
                    "memory".into(),
                )
            })
            .collect();
        let steps = |n: u32| {
            std::thread::scope(|s| {
                for b in &all {
                    s.spawn(move || {
                        for step in 0..n {
                            b.arrive(&format!("step {step}")).unwrap();
                        }
                    });
                }
            });
        };
        steps(2); // the first barriers delete nothing yet
        let before = store.touched();
        steps(10);
        let per_rank_step = (store.touched() - before) as f64 / f64::from(10 * world);
        eprintln!("world {world}: {per_rank_step:.2} keys touched per rank per step");
        // set + add + wait on one key + delete, rank 0's two deletes, and
        // the last arrival's set: at most 7, whatever the world.
        assert!(per_rank_step <= 7.0, "world {world}: {per_rank_step}");
    }
}
