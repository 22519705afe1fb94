//! One unit of `stallscope job`: the user's command run once per timing mode,
//! each a fresh process tree in its own process group, with the
//! instrumentation injected through `PYTHONPATH` and `STALLSCOPE_JOB` only.
//! The script's standard output and error reach the terminal untouched;
//! the records come back through files. A command that hangs is stopped at
//! the timeout, Ctrl-C stops the whole tree, and what finished is kept.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use stallscope_bundle::analysis::{
    JOB_SCRIPT_AGAIN_ID, JOB_SCRIPT_ID, WAIT_METHOD_PARAM, WAIT_PARTIAL, WAIT_UNSEEN,
};
use stallscope_bundle::{Experiment, Failure, ParamValue, Run, TimingMode};
use stallscope_core::{Driven, UnitCtx, UnitError};
use stallscope_python::{Ending, Process, Spawn, describe_status};

use crate::fits::{self, Known};
use crate::ranks::RankRuns;
use crate::{ending, records, what_ran};

/// What every unit of a job shares.
#[derive(Clone)]
pub struct JobPlan {
    pub command: Vec<String>,
    pub warmup: u32,
    pub steps: u32,
    pub loader: u32,
    pub timeout: Duration,
    /// Where each unit's records go (one folder per process tree).
    pub work: PathBuf,
    /// The folder holding `stallscope_job/` (the embedded package).
    pub python_dir: PathBuf,
    /// Every rank's windows, when the command launched ranks.
    pub ranks: Arc<RankRuns>,
    /// What the fits check knows so far (the batch's bytes, your loader).
    pub known: Arc<Known>,
}

/// A job's configurations (the DataLoader overrides of each) as the driver
/// runs them.
pub struct JobExperiment {
    pub plan: JobPlan,
    pub experiment: Experiment,
    /// Each configuration's overrides, as `STALLSCOPE_JOB` takes them.
    pub overrides: Vec<Value>,
    /// `STALLSCOPE_JOB.replay` of every unit: `false`, or the batches to
    /// cache and the bytes they may take.
    pub replay: Value,
    /// The timing modes of a unit, each a fresh process (both, or whole-run
    /// alone for a verification).
    pub modes: Vec<TimingMode>,
    /// The measured DataLoader as it really ran, per configuration (the
    /// first unit's `loader` record).
    pub seen: Mutex<Vec<Option<Value>>>,
    /// The `replay` record of the last unit that replayed.
    pub replayed: Mutex<Option<Value>>,
    /// How each configuration's wait was seen (`done`'s `wait.method`):
    /// the least seen of its units (`unseen` over `partial` over the rest).
    pub wait_methods: Mutex<Vec<Option<String>>>,
    /// The accelerator a unit trained on (`done`'s), if any.
    pub accelerator: Mutex<Option<String>>,
    /// Batches of the training loader per step in a finished window.
    pub batches_per_step: Mutex<Option<u64>>,
    /// Your settings' crash, once they crashed: their A/A copy is not run
    /// again to crash the same way.
    pub own_crash: Mutex<Option<Failure>>,
}

impl Driven for JobExperiment {
    fn skeleton(&self) -> Experiment {
        self.experiment.clone()
    }

    /// After every unit, so the bundle saved then is valid: what the
    /// script's DataLoader really used, as far as the units have read it.
    fn arrange(&self, experiment: &mut Experiment) {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let _notes = what_ran::record_what_ran(experiment, &seen);
        let methods = self
            .wait_methods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for (c, m) in experiment.configurations.iter_mut().zip(methods) {
            if let Some(m) = m {
                c.params
                    .insert(WAIT_METHOD_PARAM.into(), ParamValue::Text(m));
            }
        }
    }

    fn epochs_per_unit(&self) -> u64 {
        self.modes.len() as u64
    }

    fn run_unit(&mut self, index: usize, repeat: u32, cx: &UnitCtx) -> Result<Vec<Run>, UnitError> {
        let cid = self.experiment.configurations[index].id.clone();
        // Your settings always run (whether they crash is the question);
        // another point that would not fit is not run.
        let yours = self.overrides[index]
            .as_object()
            .is_none_or(|o| o.is_empty());
        if cid == JOB_SCRIPT_AGAIN_ID
            && let Some(f) = self
                .own_crash
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        {
            return Err(UnitError::Recorded(Box::new(f)));
        }
        if let Some(f) = (!yours)
            .then(|| self.plan.known.would_not_fit(&self.overrides[index]))
            .flatten()
        {
            return Err(UnitError::Recorded(Box::new(f)));
        }
        let mut runs = Vec::new();
        for mode in self.modes.clone() {
            cx.progress
                .epoch(&self.experiment.id, &cid, repeat, mode.clone(), 0);
            let unit = format!("{cid}/repeat {repeat}/{}", mode.as_str());
            let dir = self
                .plan
                .work
                .join(format!("{cid}-r{repeat}-{}", mode.as_str()));
            match self.one_process(index, &unit, &dir, &mode, repeat, cx) {
                Ok(run) => runs.push(run),
                Err(UnitError::Interrupted) => return Err(UnitError::Interrupted),
                Err(UnitError::Partial {
                    runs: part,
                    failure,
                }) => {
                    // The steps this mode measured before its fault, with
                    // what the earlier modes measured.
                    self.note_crash(&cid, &failure);
                    runs.extend(part);
                    return Err(UnitError::Partial { runs, failure });
                }
                Err(e) if runs.is_empty() => {
                    self.note_own_crash(&cid, &e);
                    return Err(e);
                }
                Err(e) => {
                    // What the first mode measured is kept with the failure.
                    let failure = Box::new(match e {
                        UnitError::Recorded(f) => *f,
                        other => Failure::Error {
                            message: other.to_string(),
                        },
                    });
                    return Err(UnitError::Partial { runs, failure });
                }
            }
            cx.progress.epoch_done();
        }
        Ok(runs)
    }
}

impl JobExperiment {
    /// How a completed window saw the training thread's wait, kept per
    /// configuration as the least seen of its units.
    fn saw_wait_method(&self, index: usize, files: &[records::ProcFile]) {
        let method = records::measured(files)
            .and_then(|f| f.first("done"))
            .and_then(|d| d["wait"]["method"].as_str())
            .map(str::to_string);
        let Some(method) = method else { return };
        let rank = |m: &str| match m {
            WAIT_UNSEEN => 2,
            WAIT_PARTIAL => 1,
            _ => 0,
        };
        let mut all = self.wait_methods.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = all.get_mut(index)
            && slot.as_deref().is_none_or(|m| rank(&method) > rank(m))
        {
            *slot = Some(method);
        }
    }

    /// Keep your settings' crash, so their A/A copy is not run to crash
    /// the same way.
    fn note_own_crash(&self, cid: &str, e: &UnitError) {
        if let UnitError::Recorded(f) = e {
            self.note_crash(cid, f);
        }
    }

    /// The same for a crash after some measured steps (a partial run).
    fn note_crash(&self, cid: &str, f: &Failure) {
        if cid == JOB_SCRIPT_ID && matches!(f, Failure::Crashed { .. }) {
            let mut own = self.own_crash.lock().unwrap_or_else(|x| x.into_inner());
            own.get_or_insert_with(|| f.clone());
        }
    }

    /// `experiment`'s configurations with their overrides, both timing
    /// modes, no replay.
    pub fn new(plan: JobPlan, experiment: Experiment, overrides: Vec<Value>) -> Self {
        let n = overrides.len();
        JobExperiment {
            plan,
            experiment,
            overrides,
            replay: Value::Bool(false),
            modes: vec![TimingMode::WholeRun, TimingMode::Diagnostic],
            seen: Mutex::new(vec![None; n]),
            replayed: Mutex::new(None),
            wait_methods: Mutex::new(vec![None; n]),
            accelerator: Mutex::new(None),
            batches_per_step: Mutex::new(None),
            own_crash: Mutex::new(None),
        }
    }

    /// Run the command once in `mode`, its records into `dir`.
    pub fn one_process(
        &self,
        index: usize,
        unit: &str,
        dir: &Path,
        mode: &TimingMode,
        repeat: u32,
        cx: &UnitCtx,
    ) -> Result<Run, UnitError> {
        let status = self.launch(index, unit, dir, mode, cx)?;
        let files = records::read_dir(dir).map_err(fail)?;
        let (steps, loader) = (self.plan.steps, self.plan.loader);
        // Every rank's window, for the per-rank bundles (not the probe's:
        // `--tune`'s probe runs outside any configuration).
        if let Some(c) = self.experiment.configurations.get(index) {
            let key = (self.experiment.id.clone(), c.id.clone());
            self.plan
                .ranks
                .record(key, &files, (mode, repeat), (steps, loader));
        }
        // What the DataLoader really used, even when the process failed
        // afterwards (the record is written at construction).
        if let Some(l) = records::any_loader(&files) {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen[index].get_or_insert_with(|| l.clone());
            if self.overrides[index]
                .as_object()
                .is_some_and(|o| o.is_empty())
            {
                let mut own = self
                    .plan
                    .known
                    .own
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                own.get_or_insert_with(|| l.clone());
            }
        }
        let run = self.judge(&files, status, mode, repeat);
        if run.is_ok() {
            self.saw_wait_method(index, &files);
        }
        let (signal, code) = (
            status.and_then(|s| s.signal()),
            status.and_then(|s| s.code()),
        );
        run.map_err(|e| match e {
            UnitError::Recorded(f) => {
                UnitError::Recorded(Box::new(fits::by_cause(*f, signal, code)))
            }
            UnitError::Partial { runs, failure } => UnitError::Partial {
                runs,
                failure: Box::new(fits::by_cause(*failure, signal, code)),
            },
            other => other,
        })
    }

    /// Start the command in `mode` with its records going to `dir`, and
    /// wait: its exit status, or `None` past the timeout.
    fn launch(
        &self,
        index: usize,
        unit: &str,
        dir: &Path,
        mode: &TimingMode,
        cx: &UnitCtx,
    ) -> Result<Option<ExitStatus>, UnitError> {
        // A folder left by an earlier run into the same --out is emptied
        // first: its records must not mix with this unit's.
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
        let config = json!({
            "protocol": records::PROTOCOL,
            "out_dir": dir,
            "mode": mode.as_str(),
            "warmup": self.plan.warmup,
            "steps": self.plan.steps,
            "loader": self.plan.loader,
            "overrides": self.overrides[index],
            "replay": self.replay,
            "unit": unit,
        });
        let mut child = self.spawn(&config)?;
        match child.wait(self.plan.timeout, cx.stop) {
            Ok(Ending::Exited(status)) => Ok(Some(status)),
            Ok(Ending::TimedOut) => Ok(None),
            Ok(Ending::Stopped) => Err(UnitError::Interrupted),
            Err(e) => Err(fail(format!("waiting for the command: {e}"))),
        }
    }

    /// The unit's run from its records and how the process ended, or its
    /// failure with the steps measured before it.
    fn judge(
        &self,
        files: &[records::ProcFile],
        status: Option<ExitStatus>,
        mode: &TimingMode,
        repeat: u32,
    ) -> Result<Run, UnitError> {
        // A window that did not complete: its failure, with the steps it
        // measured kept as a partial run.
        let partial = |failure: Failure| match records::measured(files)
            .and_then(|f| records::partial_run(f, mode, repeat))
        {
            Some(run) => UnitError::Partial {
                runs: vec![run],
                failure: Box::new(failure),
            },
            None => fail_with(failure),
        };
        let (steps, loader) = (self.plan.steps, self.plan.loader);
        let why = ending::ended(files, steps, loader);
        let Some(status) = status else {
            let at = why.map_or_else(
                || format!(", and the measured DataLoader (iteration index {loader}) was never iterated"),
                |w| format!(": {}", w.text),
            );
            return Err(partial(Failure::Error {
                message: format!(
                    "the command ran past the timeout ({:.0} s) and was stopped{at}",
                    self.plan.timeout.as_secs_f64()
                ),
            }));
        };
        let Some(f) = records::measured(files) else {
            return Err(fail_with(never_measured(files, why, status, &self.plan)));
        };
        let Some(done) = f.first("done") else {
            let failure = match why {
                Some(w) => w.failure(Some(exited(status, &self.plan))),
                None => Failure::Error {
                    message: format!(
                        "the window did not complete: {}",
                        exited(status, &self.plan)
                    ),
                },
            };
            return Err(partial(failure));
        };
        if let Some(a) = done["accelerator"].as_str() {
            *self.accelerator.lock().unwrap_or_else(|e| e.into_inner()) = Some(a.to_string());
        }
        if let Some(r) = f.first("replay") {
            *self.replayed.lock().unwrap_or_else(|e| e.into_inner()) = Some(r.clone());
        }
        if let (Some(b), Some(n)) = (done["batches"].as_u64(), done["steps"].as_u64())
            && n > 0
        {
            *self
                .batches_per_step
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(b.div_ceil(n));
        }
        let run = records::run(f, done, mode, repeat);
        // One batch's bytes: a step of gradient accumulation takes several.
        if let Some(w) = &run.whole_run
            && let (Some(bytes), Some(steps)) = (w.bytes, w.steps)
            && steps > 0
        {
            let batches = done["batches"].as_u64().filter(|&b| b >= steps);
            self.plan
                .known
                .saw_batch_bytes(bytes / batches.unwrap_or(steps));
        }
        Ok(run)
    }

    /// The command, its output passed through, the instrumentation injected.
    fn spawn(&self, config: &Value) -> Result<Process, UnitError> {
        let (program, args) = self
            .plan
            .command
            .split_first()
            .expect("clap requires a command");
        let boot = self.plan.python_dir.join("stallscope_job").join("boot");
        let mut path = vec![boot, self.plan.python_dir.clone()];
        if let Some(user) = std::env::var_os("PYTHONPATH") {
            path.extend(std::env::split_paths(&user).filter(|p| !p.as_os_str().is_empty()));
        }
        let path = std::env::join_paths(path).map_err(|e| fail(e.to_string()))?;
        Spawn::new(program)
            .args(args)
            .env("PYTHONPATH", path)
            .env("STALLSCOPE_JOB", config.to_string())
            .start()
            .map_err(|e| fail(format!("cannot start {program:?}: {e}")))
    }
}

fn fail(message: String) -> UnitError {
    fail_with(Failure::Error { message })
}

fn fail_with(f: Failure) -> UnitError {
    UnitError::Recorded(Box::new(f))
}

fn exited(status: ExitStatus, plan: &JobPlan) -> String {
    format!(
        "{} ended {}",
        plan.command.join(" "),
        describe_status(Some(status))
    )
}

/// Why no window opened: the script failed first, never iterated a
/// DataLoader, or is not a Python that loads the instrumentation.
fn never_measured(
    files: &[records::ProcFile],
    why: Option<ending::Ended>,
    status: ExitStatus,
    plan: &JobPlan,
) -> Failure {
    if let Some(why) = why {
        return why.failure(Some(exited(status, plan)));
    }
    let message = if files.is_empty() {
        format!(
            "{}, and no Python process of it built or iterated a DataLoader (is the command a \
             Python training script?)",
            exited(status, plan)
        )
    } else {
        format!(
            "{}, and the measured DataLoader (iteration index {}) was never iterated",
            exited(status, plan),
            plan.loader
        )
    };
    Failure::Error { message }
}
