//! Before a configuration runs: would its batches in flight fit this
//! machine's `/dev/shm` (and its memory limit)? Forecast with `shared`'s
//! `forecast` from what is known so far (the batch's bytes, read from any
//! unit that finished; the worker count and prefetch of the point, else
//! your settings'); a configuration that would not fit is not run and
//! stays in the bundle with the reason. After a process ends badly, its
//! failure is named by cause (`shared`'s `crash_failure`: shared memory, a
//! worker killed, the OOM killer, no space left) in one readable line.

use std::sync::Mutex;

use serde_json::Value;
use stallscope_bundle::analysis::{crash_cause, crash_failure, forecast, would_not_fit};
use stallscope_bundle::{CrashCause, Failure, ForecastInputs, HostLimits};

/// What the fits check knows of the job so far.
#[derive(Default)]
pub(crate) struct Known {
    /// Bytes of one batch of the measured loader, from a finished unit.
    pub batch_bytes: Mutex<Option<u64>>,
    /// The script's own DataLoader (its `loader` record), once read.
    pub own: Mutex<Option<Value>>,
    /// This machine's limits.
    pub limits: Option<HostLimits>,
}

impl Known {
    /// The limits of this machine, nothing else known yet.
    pub fn new() -> Self {
        Known {
            limits: Some(stallscope_core::read_limits()),
            ..Known::default()
        }
    }

    /// Keep the first batch size in bytes a unit measured.
    pub fn saw_batch_bytes(&self, bytes: u64) {
        if bytes > 0 {
            self.batch_bytes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert(bytes);
        }
    }

    /// The failure of a configuration with `overrides` that would not fit,
    /// or `None` (it fits, or too little is known to say).
    pub fn would_not_fit(&self, overrides: &Value) -> Option<Failure> {
        let bytes = (*self.batch_bytes.lock().unwrap_or_else(|e| e.into_inner()))?;
        let own = self.own.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let setting = |k: &str| {
            overrides
                .get(k)
                .cloned()
                .or_else(|| own.as_ref().map(|o| o[k].clone()))
                .unwrap_or(Value::Null)
        };
        let workers = u32::try_from(setting("num_workers").as_u64()?).ok()?;
        let inputs = ForecastInputs {
            workers,
            prefetch_factor: setting("prefetch_factor")
                .as_u64()
                .and_then(|p| u32::try_from(p).ok()),
            batch_bytes: Some(bytes),
            pin_memory: setting("pin_memory") == Value::Bool(true),
            persistent_workers: setting("persistent_workers") == Value::Bool(true),
            ..ForecastInputs::default()
        };
        would_not_fit(&forecast(&inputs, self.limits.as_ref()))
    }
}

/// A process's failure named by its cause when the text or the signal says
/// one (shared memory, a worker killed, the OOM killer, no space left);
/// any other failure as it is.
pub(crate) fn by_cause(f: Failure, signal: Option<i32>, exit_code: Option<i32>) -> Failure {
    let text = match &f {
        Failure::Error { message } => message.clone(),
        Failure::Script {
            message, traceback, ..
        } => format!("{message}\n{}", traceback.as_deref().unwrap_or("")),
        _ => return f,
    };
    if crash_cause(&text, signal) == CrashCause::Other {
        return f;
    }
    crash_failure(&text, signal, exit_code)
}
