//! What a job is asked to do (`JobOptions`, from the command line), what it
//! gives back (`JobOutcome`), how it speaks while it runs (`JobEvents`) and
//! why it could not start (`JobError`).

use std::path::PathBuf;

use stallscope_bundle::Bundle;

/// The options of `stallscope job` (docs/your-job.md has each one).
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// The training command and its arguments.
    pub command: Vec<String>,
    /// Measured steps after the warm-up; the process then ends.
    pub steps: u32,
    /// Steps handed to the script unmeasured first.
    pub warmup: u32,
    /// Which DataLoader to measure: its index in iteration order.
    pub loader: u32,
    /// Repeats of every configuration to start with.
    pub repeats: u32,
    /// Repeats a comparison may grow to while its answer is not resolved.
    pub max_repeats: u32,
    /// Minutes the repeats may grow for (none: no limit but `max_repeats`).
    pub max_minutes: Option<f64>,
    /// `--sweep KEY=V1,V2,...`, each repeatable.
    pub sweep: Vec<String>,
    pub tune: bool,
    pub replay: bool,
    pub replay_mib: u64,
    pub verify_pairs: u32,
    /// Seconds one process may run.
    pub timeout: f64,
    /// The output folder (default `out/<bundle id>`).
    pub out: Option<PathBuf>,
    /// Leave the command's arguments out of the bundle.
    pub redact_args: bool,
    /// The runner's own command line, as the bundle records it.
    pub command_line: Vec<String>,
}

/// A finished job (complete, partial or interrupted).
pub struct JobOutcome {
    pub bundle: Bundle,
    /// Where `bundle` is.
    pub path: PathBuf,
    /// What was written for the ranks, when the command launched ranks.
    pub ranks: Option<String>,
    /// Configurations that failed.
    pub failures: usize,
    /// A stop (Ctrl-C) ended it early.
    pub interrupted: bool,
}

/// What a job says while it runs (the command prints it on stderr).
pub trait JobEvents {
    /// One paragraph for the person at the terminal.
    fn note(&self, text: &str);
}

/// Why a job could not start.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// A `--sweep` that names an unknown key or a bad value.
    #[error("{0}")]
    Sweep(String),
    #[error("creating {path}: {source}")]
    Folder {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The embedded Python packages could not be written.
    #[error("{0}")]
    Packages(String),
}
