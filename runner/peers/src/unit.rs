//! One unit of a peer configuration, as the libtorch back end's loader sweep
//! hands it over: the engine, the request, and what the runner expects back.

use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;

use stallscope_core::{Progress, suite::EngineName};

use crate::protocol::{Hello, Request};

/// One unit of a peer configuration.
pub struct PeerUnit<'a> {
    pub engine: EngineName,
    pub exp_id: &'a str,
    pub config_id: &'a str,
    pub repeat: u32,
    pub request: Request,
    /// The native model's parameter count; the harness must build the same
    /// (for a user's model: what the experiment's first hello reported).
    pub expected_parameters: Option<u64>,
    /// Where the first hello of the experiment is kept, when the runner
    /// learns the model from the harness (a user's own model).
    pub first_hello: Option<&'a OnceLock<Hello>>,
    pub stop: &'a AtomicBool,
    pub progress: &'a dyn Progress,
}
