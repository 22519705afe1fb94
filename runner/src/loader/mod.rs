//! The native loader seen from the libtorch engine: the loader itself lives
//! in the device-free `stallscope-loader` crate (re-exported here); this
//! module adds what needs tensors — the feed that turns its host batches
//! into libtorch tensors, and the `loader` and `stall` experiments (their
//! suite tables are parsed in `crate::suite`).

pub mod experiment;
mod native_feed;
mod peer;
pub(crate) mod points;
pub(crate) mod source_plan;
mod stall;

pub use native_feed::{NativeFeed, Pinning, feed_error};
pub use stallscope_loader::*;
