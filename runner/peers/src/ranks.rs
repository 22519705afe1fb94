//! The other ranks of a ranked run, as one harness sees them: a stop or a
//! failure another rank announces ends this harness's wait in the
//! collective, and this harness's failure is announced to them, or, when it
//! lost its partner, attributed to the rank where the failure began.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use stallscope_bundle::Failure;
use stallscope_core::{UnitError, ranks};

use stallscope_python::Process;

/// The runner was stopped: the other ranks learn of it before this harness
/// leaves their collective (else they would record its absence as an
/// error), then it is killed.
pub(crate) fn stop(h: &mut Process) -> UnitError {
    ranks::announce_stop();
    h.kill();
    UnitError::Interrupted
}

/// While no line comes: another rank's stop sets ours (its harness has
/// gone, so this one would wait in the collective until the timeout), and
/// when another rank's harness failed in this unit, this one, waiting for
/// it in the collective, is stopped now, not at the timeout.
pub(crate) fn while_waiting(h: &mut Process, name: &str, lines: usize) -> Result<(), UnitError> {
    ranks::another_rank_stopped();
    let at = format!("{name} harness, after {lines} lines");
    if let Some(f) = ranks::unit_failed_elsewhere(&at) {
        h.kill();
        return Err(UnitError::Recorded(Box::new(f)));
    }
    Ok(())
}

/// A failure on this rank: a harness that reported its failure may have
/// lost its partner in the collective (Gloo's connection reset, or NCCL's
/// error), so another rank's failure of this unit is recorded instead; one
/// that died without a word is where a failure began, and is announced at
/// once, so the ranks whose harnesses lost this one name it (the driver's
/// own announcement comes later).
pub(crate) fn attribute(f: Failure, reported: bool, name: &str) -> Failure {
    if reported {
        failed_with_another_rank(f, name)
    } else {
        ranks::unit_failed(&f);
        f
    }
}

/// Whether a harness that failed failed of a stop: the signal reached it
/// too (Slurm signals every process of the step; a harness ended by SIGTERM,
/// SIGINT or SIGHUP waits up to 250 ms for the runner's own), or it lost its
/// partner in the collective to another rank's stop.
pub(crate) fn stopped_too(stop: &AtomicBool, status: Option<ExitStatus>) -> bool {
    let signalled = status
        .and_then(|s| s.signal())
        .is_some_and(|sig| matches!(sig, libc::SIGTERM | libc::SIGINT | libc::SIGHUP));
    let until = Instant::now() + Duration::from_millis(if signalled { 250 } else { 0 });
    loop {
        if stop.load(Ordering::SeqCst) {
            return true;
        }
        if Instant::now() >= until {
            return ranks::another_rank_stopped_now();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A harness's reported failure on a ranked run: when another rank announces
/// (within 3 s) that its run of this unit failed, the failure is that one,
/// with this harness's own error appended; else it stands.
fn failed_with_another_rank(own: Failure, name: &str) -> Failure {
    if !ranks::barrier_active() {
        return own;
    }
    let until = Instant::now() + Duration::from_secs(3);
    let at = format!("the {name} harness's collective");
    loop {
        if let Some(Failure::CommTimeout {
            operation,
            timeout_s,
            missing_ranks,
            message,
        }) = ranks::unit_failed_elsewhere_now(&at)
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
        if Instant::now() >= until {
            return own;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
