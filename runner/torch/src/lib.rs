//! stallscope's libtorch engine ([`TorchEngine`]): CUDA or the CPU through
//! `tch` and a small C++ shim ([`shim`]: allocator counters, a side stream,
//! libtorch's c10d `TCPStore` for the ranks). It builds the models
//! ([`models`]), feeds their batches ([`feed`]: the in-loop loader, and the
//! native loader's host batches as tensors without a copy), supplies the
//! one loop's step parts ([`steps`], [`prefetch`]) and runs every experiment
//! kind ([`experiments`]). Only this crate (and the command that links it)
//! knows tch.

mod batch_copy;
pub mod data;
pub mod device;
pub mod environment;
pub mod experiments;
pub mod feed;
pub mod models;
pub mod prefetch;
pub mod shim;
pub mod step_memory;
pub mod steps;

pub use experiments::TorchEngine;
