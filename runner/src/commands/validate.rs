//! `stallscope validate`: check bundles, print every problem.
use std::process::ExitCode;

use crate::cli::ValidateArgs;

pub fn run(_args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("validate: being written")
}
