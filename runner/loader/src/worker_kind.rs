//! Where a loader's workers run ([`WorkerKind`]): a leaf every part of the
//! loader may name (the trace, the OS readings, the pools) without reaching
//! into the crate's root.

use serde::{Deserialize, Serialize};

/// Where the workers run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerKind {
    /// Threads of the runner's process (the default: Rust has no GIL).
    #[default]
    Threads,
    /// Processes started from the runner's own binary; batches come back
    /// through shared memory (what process-based loaders pay).
    Processes,
}

impl WorkerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerKind::Threads => "threads",
            WorkerKind::Processes => "processes",
        }
    }
}
