//! The face a set of running workers (threads or processes) shows the
//! consumer: [`Pool`] takes tasks and reports [`Event`]s. The schedule
//! (`schedule.rs`) drives it; `threads` and `process` implement it, so
//! neither depends on the schedule.

use super::LoaderError;
use super::batch::{Batch, Task};

/// What a worker pool reports.
pub(crate) enum Event {
    Done(Box<Batch>),
    Failed {
        worker: String,
        sample: Option<u64>,
        message: String,
    },
}

/// A set of running workers (threads or processes).
pub(crate) trait Pool: Send {
    /// Give `task` to worker `worker`.
    fn submit(&mut self, worker: usize, task: Task) -> Result<(), LoaderError>;
    /// The next finished batch or failure; `None` only when `block` is false
    /// and nothing is waiting.
    fn next_event(&mut self, block: bool) -> Option<Event>;
}
