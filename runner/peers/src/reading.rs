//! The protocol's state machine over the harness's lines: one hello, then
//! the epochs in the order the request asks for them, then done; each
//! epoch becomes a run, and progress follows the epochs.

use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use stallscope_bundle::{Failure, Run, TimingMode};
use stallscope_core::{UnitError, cost::TreeSnapshot};

use stallscope_python::Process;

use crate::protocol::{EpochLine, ErrorLine, Hello, Line, decode, error, mode};
use crate::unit::PeerUnit;
use crate::{epoch, ranks, timeline};

/// What the harness did, as far as it got.
pub(crate) struct Reading<'a> {
    u: &'a PeerUnit<'a>,
    name: &'static str,
    /// The harness's process id, whose tree is measured.
    pid: u32,
    /// Every epoch the request asks for, in order.
    pub(crate) expected: Vec<(TimingMode, u32)>,
    /// Lines read so far.
    n: usize,
    hello: Option<Hello>,
    pub(crate) runs: Vec<Run>,
    pub(crate) done: bool,
    /// The harness tree's CPU counters at the last line (hello or epoch):
    /// an epoch's cost is what the tree used from the line before it to its
    /// own.
    tree_mark: Option<TreeSnapshot>,
    /// The sampler of the next epoch's window, when that one is whole-run.
    timeline: Option<timeline::EpochTimeline>,
}

impl<'a> Reading<'a> {
    /// Nothing read yet from the harness `pid` of unit `u`.
    pub(crate) fn new(u: &'a PeerUnit<'a>, pid: u32) -> Self {
        let expected = u
            .request
            .modes
            .iter()
            .flat_map(|m| (0..u.request.epochs).map(move |e| (mode(m), e)))
            .collect();
        Reading {
            u,
            name: u.engine.as_str(),
            pid,
            expected,
            n: 0,
            hello: None,
            runs: Vec::new(),
            done: false,
            tree_mark: None,
            timeline: None,
        }
    }

    /// Read the harness's lines until its stdout ends (`None`) or a line
    /// fails (the failure); a stop, or another rank's failure of this unit,
    /// kills it and ends the unit at once.
    pub(crate) fn follow(&mut self, h: &mut Process) -> Result<Option<Failure>, UnitError> {
        self.progress_next(0);
        loop {
            if self.u.stop.load(Ordering::Relaxed) {
                return Err(ranks::stop(h));
            }
            let text = match h.next_line(Duration::from_millis(50)) {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => {
                    let message = format!("{} harness: reading its output: {e}", self.name);
                    return Ok(Some(error(message)));
                }
                Err(RecvTimeoutError::Timeout) => {
                    ranks::while_waiting(h, self.name, self.n)?;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
            };
            if let ControlFlow::Break(f) = self.line(&text) {
                return Ok(Some(f));
            }
        }
    }

    /// Take the next line, or break with the failure it is.
    fn line(&mut self, text: &str) -> ControlFlow<Failure> {
        self.n += 1;
        let (name, n) = (self.name, self.n);
        if self.done {
            return ControlFlow::Break(error(format!(
                "{name} harness: line {n}: {:?} after done; expected nothing",
                text.chars().take(80).collect::<String>()
            )));
        }
        match decode(n, text) {
            Err(e) => ControlFlow::Break(error(format!("{name} harness: {e}"))),
            Ok(Line::Error(e)) => ControlFlow::Break(self.reported(e)),
            Ok(Line::Hello(h)) => self.hello(h),
            Ok(Line::Epoch(e)) => self.epoch(&e),
            Ok(Line::Done) => self.done(),
        }
    }

    /// The harness's own report of its failure.
    fn reported(&self, e: ErrorLine) -> Failure {
        let message = format!("{} harness ({}): {}", self.name, e.stage, e.message);
        if e.stage == "worker" {
            Failure::WorkerError {
                worker: None,
                sample: None,
                message,
            }
        } else {
            error(message)
        }
    }

    /// The one hello: the tree's first mark and the first epoch's sampler.
    fn hello(&mut self, h: Hello) -> ControlFlow<Failure> {
        if let Err(m) = check_hello(&h, self.u, self.hello.is_some()) {
            return ControlFlow::Break(error(format!(
                "{} harness: line {}: {m}",
                self.name, self.n
            )));
        }
        if let Some(first) = self.u.first_hello {
            let _ = first.set(h.clone());
        }
        self.hello = Some(h);
        self.tree_mark = Some(TreeSnapshot::take(self.pid));
        self.timeline = self.next_timeline(0);
        ControlFlow::Continue(())
    }

    /// The next epoch the request asks for, as a run with its cost and
    /// timeline.
    fn epoch(&mut self, e: &EpochLine) -> ControlFlow<Failure> {
        // The tree first: right after its line the harness may shut its
        // persistent workers down.
        let now = TreeSnapshot::take(self.pid);
        let k = self.runs.len();
        let want = self.expected.get(k);
        if self.hello.is_none() || want != Some(&(mode(&e.mode), e.epoch)) {
            let expected = match (&self.hello, want) {
                (None, _) => "hello first".to_string(),
                (_, Some((m, ep))) => format!("{} epoch {ep}", m.as_str()),
                (_, None) => "done".into(),
            };
            return ControlFlow::Break(error(format!(
                "{} harness: line {}: {} epoch {}; expected {expected}",
                self.name, self.n, e.mode, e.epoch
            )));
        }
        let mut run = epoch::to_run(e, self.u.repeat);
        let sampled = self.timeline.take().map(timeline::EpochTimeline::finish);
        if let Some(before) = &self.tree_mark {
            epoch::add_cost(&mut run, before, &now, e.samples);
        }
        run.timeline = sampled;
        self.runs.push(run);
        self.tree_mark = Some(now);
        self.timeline = self.next_timeline(k + 1);
        self.u.progress.epoch_done();
        self.progress_next(k + 1);
        ControlFlow::Continue(())
    }

    /// Done, after every epoch.
    fn done(&mut self) -> ControlFlow<Failure> {
        if self.runs.len() != self.expected.len() {
            return ControlFlow::Break(error(format!(
                "{} harness: line {}: done after {} of {} epochs",
                self.name,
                self.n,
                self.runs.len(),
                self.expected.len()
            )));
        }
        self.done = true;
        ControlFlow::Continue(())
    }

    /// Tell progress that epoch `k` of the request starts.
    fn progress_next(&self, k: usize) {
        if let Some((m, e)) = self.expected.get(k) {
            let u = self.u;
            u.progress
                .epoch(u.exp_id, u.config_id, u.repeat, m.clone(), *e);
        }
    }

    /// The sampler of epoch `k`'s window, when that one is whole-run.
    fn next_timeline(&self, k: usize) -> Option<timeline::EpochTimeline> {
        timeline::start(
            self.expected.get(k).map(|e| &e.0),
            self.pid,
            &self.u.request.device,
        )
    }
}

/// The hello must name the engine asked for and the model the runner
/// expects (the same parameter count as the native model).
fn check_hello(h: &Hello, u: &PeerUnit, again: bool) -> Result<(), String> {
    if again {
        return Err("a second hello; expected one".into());
    }
    if h.engine != u.engine.as_str() {
        return Err(format!(
            "engine {:?}; expected {:?}",
            h.engine,
            u.engine.as_str()
        ));
    }
    if let Some(want) = u.expected_parameters
        && h.parameters != want
    {
        let name = u.request.model.get("name").and_then(|n| n.as_str());
        if name == Some("python") {
            return Err(format!(
                "a model with {} parameters; the experiment's first configuration built one with {want}: the model factory must build the same model every time",
                h.parameters
            ));
        }
        return Err(format!(
            "a model with {} parameters; the native {} has {want}: not the same model",
            h.parameters,
            name.unwrap_or("model")
        ));
    }
    Ok(())
}
