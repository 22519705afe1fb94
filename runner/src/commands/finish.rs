//! How a command that measures ends: its report and where the bundle is,
//! its exit status (130 after a stop, 1 when a configuration failed), and
//! the stop it listens for.

use std::path::Path;
use std::process::ExitCode;

use stallscope_bundle::Bundle;
use stallscope_core::EXIT_INTERRUPTED;

use stallscope_bundle::analysis::job_closing;

use crate::report;
use crate::report::text;

/// Exit code when some configuration failed (panic, error) but the run ended.
pub const EXIT_FAILURES: u8 = 1;

/// The report of a bundle: its tables, then, for a job, its closing
/// paragraphs (`shared`'s `job_closing`), then where the bundle is: all on
/// stdout after a table; after Markdown, CSV or JSON the closing and the
/// path go to stderr so stdout stays that format. `run`, `job` and `report`
/// all print through here, so `report` says what the command said.
pub(crate) fn print_report(bundle: &Bundle, path: &Path, style: report::Style) {
    crate::out!("{}", report::render_bundle(bundle, style));
    let mut tail = String::new();
    let closing = job_closing(bundle);
    if !closing.is_empty() {
        tail.push('\n');
        for (i, p) in closing.iter().enumerate() {
            tail += &text::wrap(p, if i == 0 { "" } else { "  " }, "  ", text::WIDTH);
        }
    }
    tail += &format!("bundle: {}\n", path.display());
    match style {
        report::Style::Compact | report::Style::Wide => crate::out!("{tail}"),
        _ => eprint!("{tail}"),
    }
}

/// The exit code of a run: 130 after Ctrl-C, 1 when a configuration failed.
pub(crate) fn exit_code(interrupted: bool, failures: usize) -> ExitCode {
    if interrupted {
        eprintln!("interrupted: partial bundle written");
        ExitCode::from(EXIT_INTERRUPTED)
    } else if failures > 0 {
        ExitCode::from(EXIT_FAILURES)
    } else {
        ExitCode::SUCCESS
    }
}

/// First Ctrl-C (or SIGTERM, SIGHUP): stop after the current step and
/// write a partial bundle (`stallscope_core::STOP`). Second: SIGKILL
/// the Python processes' groups (`stallscope_python::kill_all_groups`) and
/// exit at once.
pub(crate) fn install_ctrlc() -> anyhow::Result<()> {
    stallscope_core::install_interrupt(stallscope_python::kill_all_groups)
        .map_err(anyhow::Error::msg)
}
