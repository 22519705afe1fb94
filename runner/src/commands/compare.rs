//! `stallscope compare`: side-by-side table of two bundles.
use std::process::ExitCode;

use crate::cli::CompareArgs;

pub fn run(_args: &CompareArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("compare: being written")
}
