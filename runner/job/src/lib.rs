//! `stallscope job -- COMMAND`: the user's own training command, unmodified,
//! measured through the one driver like the runner's own backends
//! (docs/your-job.md). Each
//! configuration (the script's own DataLoader settings, each point of
//! `--sweep` or of `--tune`'s grid) is a unit of `stallscope_core::drive`:
//! repeats in ascending, descending, ascending order, Ctrl-C, the bundle
//! saved after every unit. Each timing mode of a unit is a fresh process
//! tree started by `stallscope-python`, the instrumentation
//! (`python/stallscope_job`, docs/job-protocol.md) injected through the
//! environment; its records become runs through `shared`'s builders.
//!
//! - `run`: the job from its options to its bundle and closing text;
//! - `session`: the bundle while its experiments run one after another;
//! - `unit`: one configuration's units, a process per timing mode;
//! - `records`: a unit's records read back into a run;
//! - `what_ran`: what the DataLoader really used, recorded per configuration;
//! - `grid` (`--sweep`), `tune` (`--tune`'s grid), `replay` (the loader
//!   free), `verify` (the recommendation and its A/B pairs);
//! - `ranks`: a command that launched ranks gets a bundle per rank and the
//!   merged one.
//!
//! The command crate keeps only the arguments and the printing.

mod ending;
mod fits;
mod grid;
mod options;
mod ranks;
mod records;
mod repeats;
mod replay;
mod run;
mod session;
mod tune;
mod unit;
mod verify;
mod what_ran;

pub use options::{JobError, JobEvents, JobOptions, JobOutcome};
pub use run::run;
