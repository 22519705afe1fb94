//! The driver on a scripted experiment (no back end): the order of repeats,
//! panic isolation, Ctrl-C, the save after every unit, adaptive
//! experiments, not-applicable records and empty epochs.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

use stallscope_bundle::{
    Bundle, Configuration, Environment, Experiment, ExperimentKind, Failure, OomFailure, Phase,
    Provenance, Run, RunState, RunStatus, SchemaVersion, WholeRun,
};

use super::*;

fn run(steps: u64) -> Run {
    let mut r: Run = serde_json::from_value(serde_json::json!({
        "id": "w", "timing_mode": "whole_run", "repeat": 0, "epoch": 0, "phase": "steady"
    }))
    .unwrap();
    r.phase = Phase::Steady;
    r.whole_run = Some(WholeRun {
        seconds: Some(1.0),
        samples: Some(steps),
        samples_per_s: Some(steps as f64),
        steps: Some(steps),
        ..WholeRun::default()
    });
    r
}

/// Configurations `c0..cN`; what each unit does is scripted by id.
struct Script {
    configs: usize,
    log: RefCell<Vec<(usize, u32)>>,
    panic_at: Option<usize>,
    empty_at: Option<usize>,
    stop_after: Option<(usize, &'static AtomicBool)>,
    adaptive: Vec<bool>,
    not_applicable: bool,
}

impl Script {
    fn grid(configs: usize) -> Script {
        Script {
            configs,
            log: RefCell::default(),
            panic_at: None,
            empty_at: None,
            stop_after: None,
            adaptive: Vec::new(),
            not_applicable: false,
        }
    }
}

impl Driven for Script {
    fn skeleton(&self) -> Experiment {
        let mut e: Experiment = serde_json::from_value(serde_json::json!({
            "id": "e", "kind": "compute", "title": "scripted"
        }))
        .unwrap();
        e.kind = ExperimentKind::Compute;
        e.configurations = (0..self.configs)
            .map(|i| Configuration::new(format!("c{i}"), format!("c{i}")))
            .collect();
        if self.not_applicable {
            e.configurations.clear();
            e.not_applicable = Some("not here".into());
        }
        e
    }
    fn epochs_per_unit(&self) -> u64 {
        1
    }
    fn run_unit(&mut self, index: usize, repeat: u32, _: &UnitCtx) -> Result<Vec<Run>, UnitError> {
        self.log.borrow_mut().push((index, repeat));
        if let Some((after, stop)) = self.stop_after
            && self.log.borrow().len() > after
        {
            stop.store(true, Ordering::SeqCst);
            return Err(UnitError::Interrupted);
        }
        if self.panic_at == Some(index) {
            panic!("scripted panic");
        }
        if index >= self.configs {
            // Adaptive units: fit while the script says so, else OOM.
            return if self.adaptive[index - self.configs] {
                Ok(vec![run(3)])
            } else {
                Err(UnitError::Recorded(Box::new(Failure::OutOfMemory(
                    OomFailure::default(),
                ))))
            };
        }
        Ok(vec![run(if self.empty_at == Some(index) { 0 } else { 5 })])
    }
    fn next_configuration(&mut self, measured: &Experiment) -> Option<Configuration> {
        let done = measured.configurations.len() - self.configs;
        let oom = measured
            .configurations
            .iter()
            .any(|c| matches!(c.failure, Some(Failure::OutOfMemory(_))));
        (done < self.adaptive.len() && !oom)
            .then(|| Configuration::new(format!("a{done}"), format!("a{done}")))
    }
}

fn bundle(e: Experiment) -> Bundle {
    Bundle {
        schema_version: SchemaVersion::CURRENT,
        id: "b".into(),
        title: "t".into(),
        created_at: "2026-12-01T00:00:00Z".into(),
        provenance: Provenance::Measured,
        environment: Environment::default(),
        experiments: vec![e],
        status: RunStatus {
            state: RunState::Running,
            message: None,
        },
        ranks: Vec::new(),
        notes: Vec::new(),
    }
}

fn go(script: &mut Script, repeats: u32, stop: &AtomicBool) -> (Bundle, Outcome, usize) {
    let mut b = bundle(script.skeleton());
    let cx = UnitCtx {
        stop,
        progress: &NoProgress,
        inject_panic: None,
    };
    let mut saves = 0;
    let outcome = drive(&mut b, 0, script, repeats, &cx, &mut |_| saves += 1);
    (b, outcome, saves)
}

#[test]
fn repeats_alternate_and_every_unit_is_saved() {
    let mut s = Script::grid(3);
    let (b, outcome, saves) = go(&mut s, 3, &AtomicBool::new(false));
    assert_eq!(outcome, Outcome::Finished { failures: 0 });
    let order: Vec<(usize, u32)> = s.log.borrow().clone();
    assert_eq!(
        order,
        vec![
            (0, 0),
            (1, 0),
            (2, 0),
            (2, 1),
            (1, 1),
            (0, 1),
            (0, 2),
            (1, 2),
            (2, 2)
        ]
    );
    assert_eq!(saves, 9);
    assert!(
        b.experiments[0]
            .configurations
            .iter()
            .all(|c| c.runs.len() == 3)
    );
}

#[test]
fn a_panic_fails_its_configuration_only() {
    let mut s = Script::grid(3);
    s.panic_at = Some(1);
    let (b, outcome, _) = go(&mut s, 2, &AtomicBool::new(false));
    assert_eq!(outcome, Outcome::Finished { failures: 1 });
    let c = &b.experiments[0].configurations;
    assert!(
        matches!(&c[1].failure, Some(Failure::Panic { message }) if message == "scripted panic")
    );
    // The failed configuration is not retried in later repeats.
    assert_eq!(s.log.borrow().iter().filter(|(i, _)| *i == 1).count(), 1);
    assert_eq!((c[0].runs.len(), c[2].runs.len()), (2, 2));
}

#[test]
fn an_empty_epoch_is_a_failure_not_a_run() {
    let mut s = Script::grid(2);
    s.empty_at = Some(0);
    let (b, outcome, _) = go(&mut s, 1, &AtomicBool::new(false));
    assert_eq!(outcome, Outcome::Finished { failures: 1 });
    let c = &b.experiments[0].configurations[0];
    assert!(c.runs.is_empty());
    assert!(matches!(&c.failure, Some(Failure::Error { message }) if message.contains("no batch")));
}

#[test]
fn ctrl_c_keeps_what_was_measured() {
    static STOP: AtomicBool = AtomicBool::new(false);
    let mut s = Script::grid(3);
    s.stop_after = Some((4, &STOP));
    let (b, outcome, saves) = go(&mut s, 3, &STOP);
    assert_eq!(outcome, Outcome::Interrupted);
    assert_eq!(saves, 5, "saved after every unit and at the interruption");
    let c = &b.experiments[0].configurations;
    // Units 0,1,2 of repeat 0 and 2 of repeat 1 are kept; 1 was interrupted.
    assert_eq!(c.iter().map(|c| c.runs.len()).sum::<usize>(), 4);
    assert!(matches!(c[1].failure, Some(Failure::Interrupted { .. })));
}

#[test]
fn adaptive_experiments_ask_for_their_next_configuration() {
    let mut s = Script::grid(0);
    s.adaptive = vec![true, true, false, true];
    let (b, outcome, saves) = go(&mut s, 3, &AtomicBool::new(false));
    // The OOM is a result, not a failure; the probe stops after it.
    assert_eq!(outcome, Outcome::Finished { failures: 0 });
    let ids: Vec<&str> = b.experiments[0]
        .configurations
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["a0", "a1", "a2"]);
    assert_eq!(saves, 3);
}

#[test]
fn a_not_applicable_experiment_runs_nothing() {
    let mut s = Script::grid(2);
    s.not_applicable = true;
    let (b, outcome, saves) = go(&mut s, 3, &AtomicBool::new(false));
    assert_eq!(outcome, Outcome::Finished { failures: 0 });
    assert!(s.log.borrow().is_empty());
    assert_eq!(saves, 1);
    assert_eq!(b.experiments[0].not_applicable.as_deref(), Some("not here"));
}
