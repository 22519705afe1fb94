//! The runner's one stop: Ctrl-C (or SIGTERM, SIGHUP: what torchrun and
//! Slurm send first) sets [`STOP`], which the driver, the timing loop and
//! every waiting process check: the current step finishes and a partial
//! bundle is written; under ranks the others stop with it. A second one
//! runs the caller's last words (ending the processes it started, which sit
//! in process groups of their own that the terminal's Ctrl-C does not
//! reach) and quits at once.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the first Ctrl-C; checked between steps.
pub static STOP: AtomicBool = AtomicBool::new(false);

/// Exit status after a stop (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

static ON_SECOND: OnceLock<fn()> = OnceLock::new();

/// Install the handler (once per process; later calls only keep the first
/// `on_second`). `on_second` runs on the second stop, before the exit.
pub fn install_interrupt(on_second: fn()) -> Result<(), String> {
    let _ = ON_SECOND.set(on_second);
    let result = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            if let Some(f) = ON_SECOND.get() {
                f();
            }
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
        eprintln!(
            "\nstop (Ctrl-C or SIGTERM): finishing the current step and writing a partial \
             bundle (again to quit now)"
        );
    });
    match result {
        Ok(()) | Err(ctrlc::Error::MultipleHandlers) => Ok(()),
        Err(e) => Err(format!("installing the Ctrl-C handler: {e}")),
    }
}
