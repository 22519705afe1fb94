//! stallscope's device-free core: what every engine shares and none may
//! change. Suites ([`suite`]: the TOML made into a validated plan, with
//! models and optimizers as plain data in [`model_spec`]), the one driver
//! ([`driver`]: the order of repeats, panic isolation, Ctrl-C, the save after
//! every unit), the one timing loop ([`measure`]: both timing modes, the
//! clocks, memory, cost and the ranks' per-step hook, with an engine's step
//! in parts), the loader sweep's grid ([`grid`]), ranks over a small
//! key-value-store trait ([`ranks`]), cost ([`cost`]: `/proc`, NVML and the
//! timeline sampler), host facts ([`host`], [`envinfo`]), and bundle files
//! ([`bundle_file`]). No tensor library and no GPU API is linked here: the
//! engines (`stallscope-torch`, `stallscope-wgpu`, `stallscope-peers`)
//! supply their steps, and a test holds this crate to that.

pub mod bundle_file;
pub mod cost;
pub mod driver;
pub mod engine;
pub mod envinfo;
pub mod grid;
pub mod host;
pub mod interrupt;
pub mod measure;
pub mod merged_file;
pub mod model_spec;
pub mod ranks;
pub mod suite;

/// The machine's real limits (usable CPUs, the memory limit, `/dev/shm`).
mod limits;
pub use limits::{affinity_cpus, read_limits, read_limits_under, shm_space};
