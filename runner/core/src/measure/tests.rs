//! The one loop against a scripted back end that logs every call: where each
//! mode waits for the device, what it counts, and that the runs it builds
//! hold their invariants, over generated epochs.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;

use stallscope_bundle::{Phase, TimingMode};
use stallscope_loader::Rng;

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Sync,
    Start,
    Next,
    End,
    Copy,
    Compute,
}

type Log = Rc<RefCell<Vec<Call>>>;

struct Scripted {
    batches: Vec<u64>,
    stages: Stages,
    log: Log,
    /// Fail `next` at this batch.
    fail_at: Option<usize>,
    /// What the loop last asked of the loader's worker tracks.
    tracing: Option<bool>,
}

struct ScriptedEpoch {
    batches: std::vec::IntoIter<u64>,
    log: Log,
    taken: usize,
    fail_at: Option<usize>,
}

impl Steps for Scripted {
    fn synchronize(&mut self) -> Result<(), LoopError> {
        self.log.borrow_mut().push(Call::Sync);
        Ok(())
    }
    fn start_epoch(
        &mut self,
        _: u32,
        _: &TimingMode,
    ) -> Result<Box<dyn EpochSteps + '_>, LoopError> {
        self.log.borrow_mut().push(Call::Start);
        Ok(Box::new(ScriptedEpoch {
            batches: self.batches.clone().into_iter(),
            log: Rc::clone(&self.log),
            taken: 0,
            fail_at: self.fail_at,
        }))
    }
    fn stages(&self) -> Stages {
        self.stages
    }
    fn gpu(&self) -> GpuTarget {
        GpuTarget::None("scripted".into())
    }
    fn trace_workers(&mut self, on: bool) {
        self.tracing = Some(on);
    }
    /// A loader that always has tracks to give: the loop takes them only
    /// in diagnostic epochs.
    fn worker_tracks(&mut self) -> Option<stallscope_bundle::WorkerTracks> {
        Some(stallscope_bundle::WorkerTracks::default())
    }
}

impl EpochSteps for ScriptedEpoch {
    fn next(&mut self) -> Result<Option<Taken>, LoopError> {
        if self.fail_at == Some(self.taken) {
            return Err(LoopError::Failed(format!("batch {} failed", self.taken)));
        }
        let Some(samples) = self.batches.next() else {
            self.log.borrow_mut().push(Call::End);
            return Ok(None);
        };
        self.taken += 1;
        self.log.borrow_mut().push(Call::Next);
        Ok(Some(Taken {
            samples,
            bytes: samples * 10,
        }))
    }
    fn copy(&mut self) -> Result<(), LoopError> {
        self.log.borrow_mut().push(Call::Copy);
        Ok(())
    }
    fn compute(&mut self) -> Result<(), LoopError> {
        self.log.borrow_mut().push(Call::Compute);
        Ok(())
    }
    fn synchronize(&mut self) -> Result<(), LoopError> {
        self.log.borrow_mut().push(Call::Sync);
        Ok(())
    }
}

fn scripted(rng: &mut Rng) -> Scripted {
    let n = rng.below(12) as usize;
    Scripted {
        batches: (0..n).map(|_| 1 + rng.below(64)).collect(),
        stages: if rng.below(4) == 0 {
            Stages::LOADER_ONLY
        } else {
            Stages::ALL
        },
        log: Rc::default(),
        fail_at: None,
        tracing: None,
    }
}

/// The calls the loop must make, shared with the harness's loop
/// (`python/tests/test_loop_contract.py` checks the same file).
const CONTRACT: &str = include_str!("../../../../fixtures/loop/contract.json");

fn call(name: &str) -> Call {
    match name {
        "sync" => Call::Sync,
        "start" => Call::Start,
        "next" => Call::Next,
        "end" => Call::End,
        "copy" => Call::Copy,
        "compute" => Call::Compute,
        other => panic!("contract.json: unknown call {other:?}"),
    }
}

/// The calls of an epoch of `steps` steps in `mode`, from the contract.
fn expected(mode: &TimingMode, stages: Stages, steps: usize) -> Vec<Call> {
    let contract: serde_json::Value = serde_json::from_str(CONTRACT).expect("contract.json");
    let m = &contract[mode.as_str()];
    let calls = |key: &str| -> Vec<Call> {
        m[key]
            .as_array()
            .unwrap_or_else(|| panic!("contract.json: {}.{key}", mode.as_str()))
            .iter()
            .map(|c| call(c.as_str().expect("a call name")))
            .collect()
    };
    let step = if stages == Stages::ALL {
        calls("step")
    } else {
        calls("loader_only_step")
    };
    let mut v = calls("before");
    for _ in 0..steps {
        v.extend(&step);
    }
    v.extend(calls("after"));
    v
}

#[test]
fn each_mode_waits_where_the_methodology_says_and_counts_what_it_took() {
    let mut rng = Rng::new(18);
    let stop = AtomicBool::new(false);
    for round in 0..200 {
        let mut s = scripted(&mut rng);
        let mode = if round % 2 == 0 {
            TimingMode::WholeRun
        } else {
            TimingMode::Diagnostic
        };
        let slot = EpochSlot {
            mode: mode.clone(),
            repeat: rng.below(3) as u32,
            epoch: rng.below(3) as u32,
        };
        let run = run_epoch(&mut s, &slot, &stop).unwrap();

        let want = expected(&mode, s.stages, s.batches.len());
        assert_eq!(*s.log.borrow(), want, "{mode:?} {:?}", s.stages);
        // Worker tracks: asked for in diagnostic epochs only, kept only there.
        let diagnostic = mode == TimingMode::Diagnostic;
        assert_eq!(s.tracing, Some(diagnostic), "{mode:?}");
        assert_eq!(run.worker_tracks.is_some(), diagnostic, "{mode:?}");

        assert_eq!(run.id, slot.run_id());
        assert_eq!(
            run.phase,
            if slot.epoch == 0 {
                Phase::Cold
            } else {
                Phase::Steady
            }
        );
        let samples: u64 = s.batches.iter().sum();
        let cost = run.cost.as_ref().expect("every epoch has its cost");
        assert!(cost.cpu_s >= 0.0 && cost.wall_s >= 0.0);
        assert!(
            run.memory
                .as_ref()
                .is_some_and(|m| m.host_peak_rss_bytes.is_some())
        );
        match mode {
            TimingMode::WholeRun => {
                let w = run.whole_run.as_ref().unwrap();
                assert!(run.diagnostic.is_none() && run.steps.is_none());
                assert_eq!(w.samples, Some(samples));
                assert_eq!(w.steps, Some(s.batches.len() as u64));
                assert_eq!(w.bytes, Some(samples * 10));
            }
            _ => {
                assert!(run.whole_run.is_none());
                let series = run.steps.as_ref().unwrap();
                assert_eq!(series.next_wait_ns.len(), s.batches.len());
                if !s.stages.transfer {
                    assert!(series.transfer_ns.iter().all(|&t| t == 0));
                    assert!(series.compute_ns.iter().all(|&t| t == 0));
                }
                assert!(series.comm_ns.is_empty(), "one process has no comm series");
                let d = run.diagnostic.as_ref().unwrap();
                assert_eq!(d.samples, Some(samples));
                assert!(d.iterator_creation_s.is_some());
            }
        }
    }
}

#[test]
fn a_stop_ends_the_epoch_after_the_step_in_progress() {
    let stop = AtomicBool::new(true);
    for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
        let mut s = Scripted {
            batches: vec![4, 4, 4],
            stages: Stages::ALL,
            log: Rc::default(),
            fail_at: None,
            tracing: None,
        };
        let slot = EpochSlot {
            mode: mode.clone(),
            repeat: 0,
            epoch: 0,
        };
        let e = run_epoch(&mut s, &slot, &stop).unwrap_err();
        assert!(matches!(e, LoopError::Interrupted), "{e:?}");
        let nexts = s.log.borrow().iter().filter(|&&c| c == Call::Next).count();
        assert_eq!(nexts, 1, "{mode:?}");
    }
}

#[test]
fn a_back_end_error_ends_the_epoch_with_it() {
    let stop = AtomicBool::new(false);
    let mut s = Scripted {
        batches: vec![4, 4, 4],
        stages: Stages::ALL,
        log: Rc::default(),
        fail_at: Some(2),
        tracing: None,
    };
    let slot = EpochSlot {
        mode: TimingMode::Diagnostic,
        repeat: 0,
        epoch: 1,
    };
    let e = run_epoch(&mut s, &slot, &stop).unwrap_err();
    assert_eq!(e.to_string(), "batch 2 failed");
}

#[test]
fn slots_name_their_runs() {
    let slot = EpochSlot {
        mode: TimingMode::WholeRun,
        repeat: 2,
        epoch: 1,
    };
    assert_eq!(slot.run_id(), "whole_run-r2-e1");
    assert_eq!(slot.phase(), Phase::Steady);
    let run = slot.run();
    assert_eq!((run.repeat, run.epoch), (2, 1));
}
