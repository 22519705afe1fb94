//! The stallscope runner: command line, suites, the one driver, and the
//! engines (libtorch, wgpu) with their experiments.

pub mod bundle_file;
pub mod cli;
pub mod commands;
pub mod cost;
pub mod data;
pub mod device;
pub mod driver;
pub mod engine;
pub mod envinfo;
pub mod experiments;
pub mod feed;
pub mod loader;
pub mod models;
pub mod peers;
pub mod prefetch;
pub mod ranks;
pub mod report;
pub mod shim;
pub mod suite;
pub mod train;
pub mod wgpu_backend;
