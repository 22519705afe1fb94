//! One harness process per unit: started by `stallscope-python` in its own
//! process group with the request on its standard input, its lines read as
//! they come (`reading`), each epoch a bundle run, and the harness killed on
//! Ctrl-C or on a line the protocol does not allow (`ending`).

use stallscope_bundle::Run;
use stallscope_core::UnitError;
use stallscope_python::{Output, Process, Spawn};

use crate::unit::PeerUnit;
use crate::{ending, engines, reading};

/// Lines of the harness's stderr kept for messages.
const STDERR_LINES: usize = 12;

/// Run one unit in a fresh harness.
pub(crate) fn run(u: &PeerUnit) -> Result<Vec<Run>, UnitError> {
    let mut harness = start(u)?;
    let mut reading = reading::Reading::new(u, harness.id());
    let failure = reading.follow(&mut harness)?;
    ending::finish(u, harness, reading, failure)
}

/// The unit's harness, its request written.
fn start(u: &PeerUnit) -> Result<Process, UnitError> {
    let env = engines::available(u.engine).map_err(UnitError::Failed)?;
    let dir = stallscope_python::packages_dir().map_err(UnitError::Failed)?;
    let request = serde_json::to_string(&u.request).expect("the request serializes") + "\n";
    Spawn::new(&env.python)
        .args(["-m", "stallscope_peer"])
        .env("PYTHONPATH", &dir)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(request.into_bytes())
        .stdout(Output::Lines)
        .stderr(Output::Tail(STDERR_LINES))
        .start()
        .map_err(|e| {
            UnitError::Failed(format!(
                "cannot start the {} harness with {}: {e}",
                u.engine.as_str(),
                env.python.display()
            ))
        })
}
