//! stallscope's libtorch back end ([`TorchBackend`]): CUDA or the CPU
//! through `tch` and a small C++ shim (`shim`: allocator counters, a side
//! stream, libtorch's c10d `TCPStore` for the ranks: [`open_tcp_store`]).
//! It builds the models ([`Trainer`]), feeds their batches ([`Feed`]: the
//! in-loop loader, and the native loader's host batches as tensors without
//! a copy, [`NativeFeed`]), supplies the one loop's step parts
//! ([`TorchSteps`]) and runs every experiment kind, the loader sweep's
//! Python engines included (through `stallscope-peers`). Only this crate
//! (and the command that links it) knows tch.
//!
//! Its face is the root: every module is private, and what the command,
//! the tests and the benches use is re-exported here.

mod batch_copy;
mod data;
mod device;
mod environment;
mod experiments;
mod feed;
mod models;
mod prefetch;
mod shim;
mod step_memory;
mod steps;

pub use data::{FashionMnist, tensor_data};
pub use device::{DeviceCtx, DeviceRequest};
pub use environment::{apply_run_settings, environment, set_torch_threads};
pub use experiments::TorchBackend;
pub use experiments::native_feed::{NativeFeed, Pinning};
pub use experiments::source_plan::source_spec;
pub use feed::{
    Dataset, EpochIter, Feed, FeedError, HostBatch, InLoopConfig, InLoopLoader, Order,
    TensorDataset, epoch_indices,
};
pub use models::Trainer;
pub use shim::store::open_tcp_store;
pub use steps::{CopyMode, TorchSteps, to_device, train_epoch, warm_up};
