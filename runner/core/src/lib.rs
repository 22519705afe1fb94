//! stallscope's device-free core: what every back end and engine shares and
//! none may change. The one driver (the order of repeats, panic isolation,
//! Ctrl-C, the save after every unit: [`drive`], [`UnitCtx`], [`Driven`]),
//! the one timing loop (both timing modes, the clocks, memory, cost and the
//! ranks' per-step hook, with a back end's step in parts: [`run_epoch`],
//! [`Steps`], [`EpochSteps`]), the run of a whole suite on a [`Backend`]
//! ([`run_plan`]), models and optimizers as plain data ([`ModelSpec`]), host
//! facts and bundle files. No tensor library and no GPU API is linked here:
//! the back ends (`stallscope-torch`, `stallscope-wgpu`) and the Python
//! engines (`stallscope-peers`) supply their steps, and a test holds this
//! crate to that.
//!
//! Its face is the root, where what other crates use is re-exported; every
//! module is private except four namespaces, whose names mean something
//! only under them and which each re-export their own parts the same way:
//! - `suite`: the suite file in layers, made into a validated [`suite::Plan`]
//!   (a dozen plan types the command and every back end read);
//! - `grid`: a loader sweep's points across the engines (`grid::points`,
//!   `grid::configuration`);
//! - `ranks`: the rank layout, the per-step barrier and its key-value store
//!   (`ranks::start`, `ranks::current`, `ranks::KvStore`);
//! - `cost`: CPU and memory accounting, the timeline sampler and NVML
//!   (`cost::Sampler` is not the loader's sampler).

mod backend;
mod bundle_file;
pub mod cost;
mod driver;
mod envinfo;
pub mod grid;
mod host;
mod interrupt;
mod limits;
mod measure;
mod merged_file;
mod model_spec;
pub mod ranks;
pub mod suite;

pub use backend::{Backend, Finished, RunOptions, bundle_id, final_status, run_plan, seeds};
pub use bundle_file::{BundleFileError, read_bundle_file, write_atomic};
pub use driver::{
    Driven, NoProgress, NotApplicable, Outcome, Progress, UnitCtx, UnitError, drive, drive_alone,
    drive_repeat, panic_message, repeat_order,
};
pub use envinfo::{cpu_model, host_info, host_memory_bytes, runner_info};
pub use host::{peak_rss_bytes, reset_peak_rss};
pub use interrupt::{EXIT_INTERRUPTED, STOP, install_interrupt};
pub use limits::read_limits;
pub use measure::{EpochSlot, EpochSteps, LoopError, Stages, Steps, Taken, run_epoch};
pub use merged_file::{MergedFileError, MergedWritten, merge_into, rank_files, read_rank_bundles};
pub use model_spec::{ModelSpec, OptimizerSpec};
