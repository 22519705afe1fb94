//! stallscope-bundle: the result-bundle format shared by the runner and the
//! viewer — serde types ([`format`]), reading with clear errors ([`read`]),
//! validation ([`validate`]) and every analysis ([`analysis`]), so the command
//! line and the browser compute the same numbers from the same code.
//!
//! Invariant: nothing here touches a filesystem, a clock or a device; the
//! crate builds for `wasm32-unknown-unknown`.

pub mod analysis;
pub mod format;
pub mod merge;
pub mod read;
#[cfg(feature = "schema")]
pub mod schema;
pub mod sidecar;
pub mod validate;

pub use format::*;
pub use read::{MAX_BUNDLE_BYTES, ReadError, parse_bundle, parse_bundle_located, read_bundle};
pub use validate::{Problem, validate};
