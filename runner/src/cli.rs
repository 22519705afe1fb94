//! Command-line parsing (clap) and dispatch to the subcommands.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands::{
    self, bare::BareImagesArgs, compare::CompareArgs, env::EnvArgs, job::JobArgs, merge::MergeArgs,
    report::ReportArgs, run::RunArgs, serve::ServeArgs, site::SiteArgs, trace::TraceArgs,
    validate::ValidateArgs,
};

#[derive(Debug, Parser)]
#[command(
    name = "stallscope",
    version,
    about = "Find where a training step waits — data loader, host-to-device copy, or model — and which loader settings fix it, at what memory cost."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check bundles against the format; every problem with its JSON path.
    Validate(ValidateArgs),
    /// Side-by-side table of two bundles; exit 1 on a whole-run regression beyond the threshold.
    Compare(CompareArgs),
    /// Run a suite (default: the quickstart preset) and write a result bundle.
    Run(RunArgs),
    /// Measure your own training command, unmodified: `stallscope job -- python train.py`.
    Job(JobArgs),
    /// Print a saved bundle's report again: the one `run` prints at its end.
    Report(ReportArgs),
    /// Print what the runner records about the machine and the software.
    Env(EnvArgs),
    /// Per-step timeline of a diagnostic run as Chrome trace-event JSON (for Perfetto).
    Trace(TraceArgs),
    /// Write a self-contained static site: the viewer, the bundles and an index.
    Site(SiteArgs),
    /// Serve a directory (an exported site) on 127.0.0.1.
    Serve(ServeArgs),
    /// Merge the per-rank bundles (`*.rank-*.json`) of a folder into one with a rank dimension.
    Merge(MergeArgs),
    /// The bare per-image function of a suite's image experiment on one thread (for benches).
    #[command(hide = true)]
    BareImages(BareImagesArgs),
}

/// Parse the command line, run the command, map errors to exit codes.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate(args) => commands::validate::run(&args),
        Command::Compare(args) => commands::compare::run(&args),
        Command::Run(args) => commands::run::run(&args),
        Command::Job(args) => commands::job::run(&args),
        Command::Report(args) => commands::report::run(&args),
        Command::Env(args) => commands::env::run(&args),
        Command::Trace(args) => commands::trace::run(&args),
        Command::Site(args) => commands::site::run(&args),
        Command::Serve(args) => commands::serve::run(&args),
        Command::Merge(args) => commands::merge::run(&args),
        Command::BareImages(args) => commands::bare::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
