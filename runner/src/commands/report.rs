//! `stallscope report BUNDLE`: print a saved bundle's report again — the
//! same one `run` prints at its end — compact by default, or in full with
//! `--wide` / `--format markdown|csv|json`; exit 2 when the bundle cannot be
//! read (every problem named with the file).

use std::process::ExitCode;

use crate::cli::ReportArgs;
use crate::report;
use stallscope_core::bundle_file;

pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let bundle = match bundle_file::read(&args.bundle) {
        Ok(b) => b,
        Err(e) => {
            for p in e.paragraphs() {
                eprintln!("{p}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    print!("{}", report::render_bundle(&bundle, args.output.style()));
    Ok(ExitCode::SUCCESS)
}
