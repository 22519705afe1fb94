//! Why an epoch stopped ([`LoopError`]): a leaf, so the ranks' per-step
//! barrier can say why it failed without depending on the loop that calls it.

use stallscope_bundle::Failure;

/// Why an epoch stopped.
#[derive(Debug)]
pub enum LoopError {
    Interrupted,
    /// The ranks' per-step barrier failed (`crate::ranks`): a
    /// `Failure::CommTimeout` naming the missing ranks.
    Comm(Box<Failure>),
    /// A failure the back end records as it is (a loader worker's names the
    /// worker and the sample).
    Recorded(Box<Failure>),
    /// Anything else, in words that say what was expected.
    Failed(String),
}

impl std::fmt::Display for LoopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoopError::Interrupted => f.write_str("interrupted (Ctrl-C)"),
            LoopError::Comm(failure) => write!(f, "comm: {failure:?}"),
            LoopError::Recorded(failure) => write!(f, "{failure:?}"),
            LoopError::Failed(message) => f.write_str(message),
        }
    }
}

/// Any back end's error (libtorch's, wgpu's, a feed's) ends the epoch with
/// its message: so a back end's step parts use `?` on their own errors.
/// (`LoopError` is not itself a `std::error::Error`, as `anyhow::Error` is
/// not, so this impl does not overlap `From<T> for T`.)
impl<E: std::error::Error> From<E> for LoopError {
    fn from(e: E) -> Self {
        LoopError::Failed(e.to_string())
    }
}
