//! How the harness ended, once its output is read: killed after a failed
//! line, or waited for; a harness that ended without its done line is a
//! failure with its exit and its stderr's last words; a failure that was a
//! stop is an interruption; and the runs read so far are kept.

use std::process::ExitStatus;

use stallscope_bundle::{Failure, Run};
use stallscope_core::UnitError;

use stallscope_python::{Process, describe_status};

use crate::protocol::error;
use crate::ranks;
use crate::reading::Reading;
use crate::unit::PeerUnit;

/// The unit's result from what the harness did and how it ended.
pub(crate) fn finish(
    u: &PeerUnit,
    harness: Process,
    reading: Reading,
    failure: Option<Failure>,
) -> Result<Vec<Run>, UnitError> {
    let name = u.engine.as_str();
    let (status, stderr) = harness.finish(failure.is_some());
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
    stderr: &str,
) -> Option<Failure> {
    if status.is_some_and(|s| s.success()) && reading.done {
        return None;
    }
    Some(error(format!(
        "the {name} harness ended {} after {} of {} epochs, without its done line{stderr}",
        describe_status(status),
        reading.runs.len(),
        reading.expected.len(),
    )))
}
