//! One harness process per unit: start it in its own process group (so a
//! terminal's Ctrl-C reaches the runner only), write the request, read its
//! lines as they come, turn each epoch into a bundle run, and kill it on
//! Ctrl-C or on a line the protocol does not allow.
//!
//! `spawn` starts the harness and follows its output streams, `reading`
//! holds the protocol's state machine, `epoch` turns an epoch line into a
//! run, `ending` judges how the harness ended, and `ranks` is what the
//! other ranks of a ranked run change in all that.

mod ending;
mod epoch;
mod ranks;
mod reading;
mod spawn;

use stallscope_bundle::{Failure, Run, TimingMode};
use stallscope_core::driver::UnitError;

use super::PeerUnit;

/// Run one unit in a fresh harness.
pub fn run(u: &PeerUnit) -> Result<Vec<Run>, UnitError> {
    let mut harness = spawn::Harness::start(u)?;
    let mut reading = reading::Reading::new(u, harness.id());
    let failure = reading.follow(&mut harness)?;
    ending::finish(u, harness, reading, failure)
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
