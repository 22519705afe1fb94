//! How the harness ended, once its output is read: killed after a failed
//! line, or waited for; a harness that ended without its done line is a
//! failure with its exit and its stderr's last words; a failure that was a
//! stop is an interruption; and the runs read so far are kept.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use stallscope_bundle::{Failure, Run};
use stallscope_core::driver::UnitError;

use super::super::PeerUnit;
use super::reading::Reading;
use super::spawn::{Harness, StderrTail};
use super::{error, ranks};

/// The unit's result from what the harness did and how it ended.
pub(super) fn finish(
    u: &PeerUnit,
    harness: Harness,
    reading: Reading,
    failure: Option<Failure>,
) -> Result<Vec<Run>, UnitError> {
    let name = u.engine.as_str();
    let (status, stderr) = harness.end(failure.is_some());
    let reported = failure.is_some();
    let failure = failure.or_else(|| ended_early(name, status, &reading, &stderr));
    if failure.is_some() && ranks::stopped_too(u.stop, status) {
        return Err(UnitError::Interrupted);
    }
    let failure = failure.map(|f| ranks::attribute(f, reported, name));
    let runs = reading.runs;
    match failure {
        None => Ok(runs),
        Some(f) if runs.is_empty() => Err(UnitError::Recorded(Box::new(f))),
        Some(f) => Err(UnitError::Partial {
            runs,
            failure: Box::new(f),
        }),
    }
}

/// The failure of a harness whose output ended without a failed line:
/// none when it exited with success after its done line.
fn ended_early(
    name: &str,
    status: Option<ExitStatus>,
    reading: &Reading,
    stderr: &StderrTail,
) -> Option<Failure> {
    if status.is_some_and(|s| s.success()) && reading.done {
        return None;
    }
    Some(error(format!(
        "the {name} harness ended {} after {} of {} epochs, without its done line{}",
        how_it_ended(status),
        reading.runs.len(),
        reading.expected.len(),
        stderr.message()
    )))
}

/// "by signal 9 (killed)", "with exit status: 1", or "abnormally".
fn how_it_ended(status: Option<ExitStatus>) -> String {
    match (status, status.and_then(|s| s.signal())) {
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
    }
}
