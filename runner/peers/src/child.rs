//! One harness process per unit: start it in its own process group (so a
//! terminal's Ctrl-C reaches the runner only), write the request, read its
//! lines as they come, turn each epoch into a bundle run, and kill it on
//! Ctrl-C or on a line the protocol does not allow.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stallscope_bundle::{Failure, Memory, Phase, Run, StepSeries, TimingMode, WholeRun};

use super::protocol::{EpochLine, Hello, Line, decode};
use super::{PeerUnit, python};
use stallscope_bundle::analysis::diagnostic_from_series;
use stallscope_core::driver::UnitError;

/// Lines of the harness's stderr kept for messages.
const STDERR_LINES: usize = 12;

/// What the harness did, as far as it got.
struct Reading {
    hello: Option<Hello>,
    runs: Vec<Run>,
    done: bool,
}

/// Run one unit in a fresh harness.
pub fn run(u: &PeerUnit) -> Result<Vec<Run>, UnitError> {
    let env = python::available(u.engine).map_err(UnitError::Failed)?;
    let dir = super::harness::dir().map_err(UnitError::Failed)?;
    let name = u.engine.as_str();
    let mut child = Command::new(&env.python)
        .args(["-m", "stallscope_peer"])
        .env("PYTHONPATH", &dir)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| {
            UnitError::Failed(format!(
                "cannot start the {name} harness with {}: {e}",
                env.python.display()
            ))
        })?;
    let request = serde_json::to_string(&u.request).expect("the request serializes");
    if let Some(mut stdin) = child.stdin.take() {
        // A harness that dies at once shows up below, with its stderr.
        let _ = stdin.write_all(request.as_bytes());
        let _ = stdin.write_all(b"\n");
    }
    let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
    if let Some(err) = child.stderr.take() {
        let tail = Arc::clone(&stderr_tail);
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut t = tail.lock().expect("stderr tail");
                if t.len() == STDERR_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
    }
    let (tx, rx) = channel();
    let out = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut reading = Reading {
        hello: None,
        runs: Vec::new(),
        done: false,
    };
    let expected: Vec<(TimingMode, u32)> = u
        .request
        .modes
        .iter()
        .flat_map(|m| (0..u.request.epochs).map(move |e| (mode(m), e)))
        .collect();
    let progress_next = |k: usize| {
        if let Some((m, e)) = expected.get(k) {
            u.progress
                .epoch(u.exp_id, u.config_id, u.repeat, m.clone(), *e);
        }
    };
    progress_next(0);
    // The harness tree's CPU counters at the last line (hello or epoch): an
    // epoch's cost is what the tree used from the line before it to its own.
    let mut tree_mark: Option<stallscope_core::cost::tree::TreeSnapshot> = None;
    // The sampler of the next epoch's window, when that one is whole-run.
    let mut timeline: Option<super::timeline::EpochTimeline> = None;
    let next_timeline = |k: usize| {
        super::timeline::start(expected.get(k).map(|e| &e.0), child.id(), &u.request.device)
    };
    let mut n = 0;
    let failure: Option<Failure> = loop {
        if u.stop.load(Ordering::Relaxed) {
            // Ranks: the others learn of the stop before this harness leaves
            // their collective (else they would record its absence as an error).
            stallscope_core::ranks::announce_stop();
            kill(&mut child);
            return Err(UnitError::Interrupted);
        }
        let text = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => break Some(error(format!("{name} harness: reading its output: {e}"))),
            Err(RecvTimeoutError::Timeout) => {
                // Ranks: another rank's stop sets ours (its harness has gone,
                // so this one would wait in the collective until the timeout).
                stallscope_core::ranks::another_rank_stopped();
                // Another rank's harness failed in this unit: this one waits
                // for it in the collective; stop it now, not at the timeout.
                let at = format!("{name} harness, after {n} lines");
                if let Some(f) = stallscope_core::ranks::unit_failed_elsewhere(&at) {
                    kill(&mut child);
                    return Err(UnitError::Recorded(Box::new(f)));
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break None,
        };
        n += 1;
        if reading.done {
            break Some(error(format!(
                "{name} harness: line {n}: {:?} after done; expected nothing",
                text.chars().take(80).collect::<String>()
            )));
        }
        match decode(n, &text) {
            Err(e) => break Some(error(format!("{name} harness: {e}"))),
            Ok(Line::Error(e)) => {
                let message = format!("{name} harness ({}): {}", e.stage, e.message);
                break Some(if e.stage == "worker" {
                    Failure::WorkerError {
                        worker: None,
                        sample: None,
                        message,
                    }
                } else {
                    error(message)
                });
            }
            Ok(Line::Hello(h)) => {
                if let Err(m) = check_hello(&h, u, reading.hello.is_some()) {
                    break Some(error(format!("{name} harness: line {n}: {m}")));
                }
                reading.hello = Some(h);
                tree_mark = Some(stallscope_core::cost::tree::TreeSnapshot::take(child.id()));
                timeline = next_timeline(0);
            }
            Ok(Line::Epoch(e)) => {
                // The tree first: right after its line the harness may shut
                // its persistent workers down.
                let now = stallscope_core::cost::tree::TreeSnapshot::take(child.id());
                let k = reading.runs.len();
                let want = expected.get(k);
                if reading.hello.is_none() || want != Some(&(mode(&e.mode), e.epoch)) {
                    break Some(error(format!(
                        "{name} harness: line {n}: {} epoch {}; expected {}",
                        e.mode,
                        e.epoch,
                        match (&reading.hello, want) {
                            (None, _) => "hello first".to_string(),
                            (_, Some((m, ep))) => format!("{} epoch {ep}", m.as_str()),
                            (_, None) => "done".into(),
                        }
                    )));
                }
                reading.runs.push(to_run(&e, u.repeat));
                let sampled = timeline.take().map(super::timeline::EpochTimeline::finish);
                if let (Some(run), Some(before)) = (reading.runs.last_mut(), &tree_mark) {
                    let cost =
                        stallscope_core::cost::tree::tree_cost(before, &now, e.samples, "harness");
                    run.cost = Some(cost);
                    if let Some(m) = run.memory.as_mut() {
                        m.workers_peak_rss_bytes =
                            now.descendants_peak_rss_bytes(Some(before), m.workers_peak_rss_bytes);
                    }
                }
                if let Some(run) = reading.runs.last_mut() {
                    run.timeline = sampled;
                }
                tree_mark = Some(now);
                timeline = next_timeline(k + 1);
                u.progress.epoch_done();
                progress_next(k + 1);
            }
            Ok(Line::Done) => {
                if reading.runs.len() != expected.len() {
                    break Some(error(format!(
                        "{name} harness: line {n}: done after {} of {} epochs",
                        reading.runs.len(),
                        expected.len()
                    )));
                }
                reading.done = true;
            }
        }
    };
    let status = match failure {
        Some(_) => {
            kill(&mut child);
            None
        }
        None => child.wait().ok(),
    };
    let _ = reader.join();
    let tail = || {
        // Give the stderr thread a moment to read the last words.
        std::thread::sleep(Duration::from_millis(50));
        let t = stderr_tail.lock().expect("stderr tail");
        if t.is_empty() {
            String::new()
        } else {
            format!(
                "; its stderr ended with: {}",
                t.iter().cloned().collect::<Vec<_>>().join(" | ")
            )
        }
    };
    // A harness that reported its failure may have lost its partner in the
    // collective; one that died without a word is where a failure began.
    let reported = failure.is_some();
    let failure = match (failure, status) {
        (Some(f), _) => Some(f),
        (None, Some(s)) if s.success() && reading.done => None,
        (None, s) => Some(error(format!(
            "the {name} harness ended {} after {} of {} epochs, without its done line{}",
            match (s, s.and_then(|s| s.signal())) {
                (_, Some(sig)) => format!(
                    "by signal {sig}{}",
                    if sig == libc::SIGKILL {
                        " (killed)"
                    } else {
                        ""
                    }
                ),
                (Some(s), None) => format!("with {s}"),
                (None, None) => "abnormally".into(),
            },
            reading.runs.len(),
            expected.len(),
            tail()
        ))),
    };
    if failure.is_some() && stopped_too(u.stop, status) {
        return Err(UnitError::Interrupted);
    }
    // Ranks: a harness that lost its partner (Gloo's connection reset, or
    // NCCL's error) failed of another rank's failure: record that one.
    let failure = failure.map(|f| {
        if reported {
            failed_with_another_rank(f, name)
        } else {
            // Told at once, so the ranks whose harnesses lost this one
            // name it (the driver's own announcement comes later).
            stallscope_core::ranks::unit_failed(&f);
            f
        }
    });
    match failure {
        None => Ok(reading.runs),
        Some(f) if reading.runs.is_empty() => Err(UnitError::Recorded(Box::new(f))),
        Some(f) => Err(UnitError::Partial {
            runs: reading.runs,
            failure: Box::new(f),
        }),
    }
}

/// Whether a harness that failed failed of a stop: the signal reached it
/// too (Slurm signals every process of the step; a harness ended by SIGTERM,
/// SIGINT or SIGHUP waits up to 250 ms for the runner's own), or it lost its
/// partner in the collective to another rank's stop.
fn stopped_too(stop: &AtomicBool, status: Option<std::process::ExitStatus>) -> bool {
    let signalled = status
        .and_then(|s| s.signal())
        .is_some_and(|sig| matches!(sig, libc::SIGTERM | libc::SIGINT | libc::SIGHUP));
    let until = std::time::Instant::now() + Duration::from_millis(if signalled { 250 } else { 0 });
    loop {
        if stop.load(Ordering::SeqCst) {
            return true;
        }
        if std::time::Instant::now() >= until {
            return stallscope_core::ranks::another_rank_stopped_now();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A harness's reported failure on a ranked run: when another rank announces
/// (within 3 s) that its run of this unit failed, the failure is that one,
/// with this harness's own error appended; else it stands.
fn failed_with_another_rank(own: Failure, name: &str) -> Failure {
    if !stallscope_core::ranks::barrier_active() {
        return own;
    }
    let until = std::time::Instant::now() + Duration::from_secs(3);
    let at = format!("the {name} harness's collective");
    loop {
        if let Some(Failure::CommTimeout {
            operation,
            timeout_s,
            missing_ranks,
            message,
        }) = stallscope_core::ranks::unit_failed_elsewhere_now(&at)
        {
            let mine = match &own {
                Failure::Error { message } => message.clone(),
                other => format!("{other:?}"),
            };
            return Failure::CommTimeout {
                operation,
                timeout_s,
                missing_ranks,
                message: format!("{message} (this rank's harness: {mine})"),
            };
        }
        if std::time::Instant::now() >= until {
            return own;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn error(message: String) -> Failure {
    Failure::Error { message }
}

fn mode(m: &str) -> TimingMode {
    match m {
        "whole_run" => TimingMode::WholeRun,
        _ => TimingMode::Diagnostic,
    }
}

fn kill(child: &mut Child) {
    // The whole group: DataLoader workers and SPDL's processes with it.
    let pid = child.id() as i32;
    // SAFETY: kill(2) on the group this runner created for the child.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
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
        return Err(format!(
            "a model with {} parameters; the native {} has {want}: not the same model",
            h.parameters,
            u.request
                .model
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or("model")
        ));
    }
    Ok(())
}

/// One epoch line as a bundle run: the same run id, phase and fields as the
/// native loop writes, the stages computed by `shared` from the series.
fn to_run(e: &EpochLine, repeat: u32) -> Run {
    let m = mode(&e.mode);
    let phase = if e.epoch == 0 {
        Phase::Cold
    } else {
        Phase::Steady
    };
    let mut run = Run::new(
        format!("{}-r{repeat}-e{}", m.as_str(), e.epoch),
        m.clone(),
        repeat,
        e.epoch,
        phase,
    );
    match m {
        TimingMode::WholeRun => {
            run.whole_run = Some(WholeRun::measured(e.seconds, e.samples, e.steps, e.bytes))
        }
        _ => {
            let series = StepSeries {
                next_wait_ns: e.next_wait_ns.clone().unwrap_or_default(),
                transfer_ns: e.transfer_ns.clone().unwrap_or_default(),
                compute_ns: e.compute_ns.clone().unwrap_or_default(),
                comm_ns: e.comm_ns.clone().unwrap_or_default(),
            };
            run.diagnostic = Some(diagnostic_from_series(
                &series,
                e.seconds,
                e.samples,
                e.bytes,
                e.iterator_creation_s,
            ));
            run.steps = Some(series);
        }
    }
    run.loader = e.loader.clone();
    run.memory = Some(Memory {
        host_peak_rss_bytes: e.host_peak_rss_bytes,
        workers_peak_rss_bytes: e.children_peak_rss_bytes,
        ..Memory::default()
    });
    run
}
