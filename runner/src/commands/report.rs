//! `stallscope report BUNDLE`: print a saved bundle's report again, exactly
//! as `run` or `job` printed it at its end (the same function prints both,
//! a job's closing paragraphs included), compact by default, or in full
//! with `--wide` / `--format markdown|csv|json`; exit 2 when the bundle
//! cannot be read (every problem named with the file).

use std::path::PathBuf;
use std::process::ExitCode;

use super::finish::print_report;
use super::output::OutputArgs;
use stallscope_core::read_bundle_file;

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The bundle (JSON), e.g. out/<id>/bundle.json.
    pub bundle: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let bundle = match read_bundle_file(&args.bundle) {
        Ok(b) => b,
        Err(e) => {
            for p in e.paragraphs() {
                eprintln!("{p}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    print_report(&bundle, &args.bundle, args.output.style());
    Ok(ExitCode::SUCCESS)
}
