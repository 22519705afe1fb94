//! The serialized types of a result bundle: the one data format between the
//! runner and the viewer, and therefore a public API.
//!
//! Rules for changing it (see ARCHITECTURE.md):
//! - fields are never removed or renamed; a new field is `Option` or has
//!   `#[serde(default)]` and a doc line "Added in format 1.N", with
//!   [`FORMAT_MINOR`] raised;
//! - anything a reader of an older minor cannot ignore raises [`FORMAT_MAJOR`];
//! - unknown fields are ignored when reading, so a newer minor is read;
//! - the open enums ([`ExperimentKind`], [`TimingMode`], [`Engine`] and the
//!   kind of [`Failure`]) keep a value this build does not know as text
//!   (`Unknown`, see [`open`]); [`crate::read`] accepts one only from a
//!   bundle of a newer minor than [`FORMAT_MINOR`].
//!
//! Units: durations in seconds (`*_s`, f64) except per-step arrays, which are
//! integer nanoseconds (`*_ns`) to keep large bundles small; memory in bytes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod build;
mod methods;
pub mod open;

pub use open::{FAILURE_KINDS, OpenEnum};

/// The major version this build reads and writes.
pub const FORMAT_MAJOR: u32 = 1;
/// The minor version this build writes.
pub const FORMAT_MINOR: u32 = 5;

macro_rules! format_type {
    ($($item:item)*) => {
        $(
            #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
            #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
            $item
        )*
    };
}

mod cost;
mod limits;
mod noise;
mod ranks;
mod tracks;

pub use cost::{CpuCost, CpuPart, CpuPartKind, GpuTimeline, Timeline};
pub use limits::{
    CopyOnRead, CrashCause, Forecast, ForecastFigure, ForecastInputs, HostLimits, Resource,
    WorkerWindow,
};
pub use noise::NoiseFloor;
pub use ranks::{JobOf, RankColumns, RankHost, RankLayout, RankSidecar};
pub use tracks::{TrackBatches, TrackSamples, TrackStage, TrackSteps, WorkerTracks};

format_type! {
    /// `{major, minor}` of the format a bundle was written in.
    #[derive(Copy, Eq)]
    pub struct SchemaVersion {
        pub major: u32,
        pub minor: u32,
    }

    /// A result bundle: everything one `stallscope run` measured, or a
    /// published table transcribed with its citation.
    pub struct Bundle {
        pub schema_version: SchemaVersion,
        /// Unique id of this bundle (the runner uses the UTC start time and a
        /// random suffix).
        pub id: String,
        /// Human title. Shown as text, never as HTML.
        pub title: String,
        /// RFC 3339 UTC time the run started (or the publication date).
        pub created_at: String,
        /// Whether the numbers were measured by stallscope or transcribed
        /// from a publication.
        pub provenance: Provenance,
        pub environment: Environment,
        #[serde(default)]
        pub experiments: Vec<Experiment>,
        pub status: RunStatus,
        /// Every rank of a merged multi-rank bundle (`stallscope merge`),
        /// ascending by rank; empty for a single process. Runs carry their
        /// `rank`. Added in format 1.2.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub ranks: Vec<RankHost>,
        /// Free-form notes (shown as text).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub notes: Vec<String>,
    }

    /// Where the figures come from.
    #[serde(tag = "kind", rename_all = "snake_case")]
    pub enum Provenance {
        /// Measured by the stallscope runner on the machine in `environment`.
        Measured,
        /// Transcribed from a publication; every figure is as published.
        Published {
            citation: Citation,
            /// The conditions as the publication states them, in its order.
            #[serde(default)]
            conditions: Vec<Condition>,
        },
    }

    /// A publication a published bundle transcribes.
    #[derive(Default)]
    pub struct Citation {
        pub title: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub authors: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub published: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub url: Option<String>,
        /// Where in the project the source lives (e.g. `seeds/003`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub locator: Option<String>,
    }

    /// One stated condition of a published measurement.
    pub struct Condition {
        pub name: String,
        pub value: String,
    }

    /// What the run recorded about the machine and the software.
    #[derive(Default)]
    pub struct Environment {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub runner: Option<RunnerInfo>,
        /// The exact command line, one argument per element.
        #[serde(default)]
        pub command_line: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub suite: Option<SuiteRecord>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub host: Option<HostInfo>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub device: Option<DeviceInfo>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub libtorch: Option<LibtorchInfo>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub wgpu: Option<WgpuInfo>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub threads: Option<ThreadInfo>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub precision: Option<PrecisionInfo>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub seeds: Option<Seeds>,
        /// This process's place among the ranks of a distributed run (torchrun,
        /// Slurm); absent for a single process. Added in format 1.2.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub rank: Option<RankLayout>,
        /// What this machine lets a run use (usable CPUs under affinity and
        /// a cgroup quota, the memory limit, `/dev/shm`): what forecasts and
        /// recommendations are held to, not the host's core count. Added in
        /// format 1.5.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub limits: Option<HostLimits>,
    }

    /// The program that wrote the bundle.
    #[derive(Default)]
    pub struct RunnerInfo {
        pub name: String,
        pub version: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub commit: Option<String>,
    }

    /// The suite that was run, verbatim.
    #[derive(Default)]
    pub struct SuiteRecord {
        pub name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub path: Option<String>,
        /// The TOML text as read.
        pub toml: String,
    }

    /// The host machine.
    #[derive(Default)]
    pub struct HostInfo {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cpu_model: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub logical_cores: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub memory_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub os: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub kernel: Option<String>,
    }

    /// What kind of device ran the model.
    #[derive(Copy, Eq, Hash, PartialOrd, Ord)]
    #[serde(rename_all = "snake_case")]
    pub enum DeviceKind {
        Cpu,
        Cuda,
        Wgpu,
    }

    /// The device the experiments ran on.
    pub struct DeviceInfo {
        pub kind: DeviceKind,
        pub name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub index: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub memory_total_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub driver: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cuda_runtime: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub compute_capability: Option<String>,
        /// For wgpu: the backend (Vulkan, Metal, Dx12, Gl).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub backend: Option<String>,
        /// For wgpu: the adapter's device type (DiscreteGpu, Cpu, ...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub device_type: Option<String>,
    }

    /// The libtorch the runner used.
    #[derive(Default)]
    pub struct LibtorchInfo {
        pub version: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cuda: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cudnn: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub path: Option<String>,
    }

    /// The wgpu library and adapter.
    #[derive(Default)]
    pub struct WgpuInfo {
        pub version: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub adapter: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub backend: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub driver: Option<String>,
    }

    /// Thread counts in force.
    #[derive(Default)]
    pub struct ThreadInfo {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub torch_intra_op: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub torch_inter_op: Option<u32>,
    }

    /// Numeric precision settings.
    #[derive(Default)]
    pub struct PrecisionInfo {
        /// e.g. `float32`.
        pub dtype: String,
        pub tf32_matmul: bool,
        pub tf32_cudnn: bool,
    }

    /// Seeds shared by every configuration of the run.
    #[derive(Default, Copy, Eq)]
    pub struct Seeds {
        /// Seed of the initial weights (the same for every configuration).
        pub weights: u64,
        /// Seed of the sampler's shuffle.
        pub shuffle: u64,
        /// Seed of generated data.
        pub data: u64,
    }

    /// Whether the run that wrote the bundle finished.
    pub struct RunStatus {
        pub state: RunState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub message: Option<String>,
    }

    /// State of the run when the bundle was last written.
    #[derive(Copy, Eq)]
    #[serde(rename_all = "snake_case")]
    pub enum RunState {
        /// Every configuration ran (some may have recorded failures).
        Complete,
        /// Stopped early (Ctrl-C, an error); everything finished before is kept.
        Partial,
        /// Written while the run was going; the process did not get to finish.
        Running,
    }

    /// One experiment: a grid of configurations of one kind.
    pub struct Experiment {
        pub id: String,
        pub kind: ExperimentKind,
        pub title: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub description: Option<String>,
        /// Names of the parameters that vary across configurations, first the
        /// one charts put on the x axis.
        #[serde(default)]
        pub swept: Vec<String>,
        /// Settings shared by every configuration (model, data source, ...).
        #[serde(default)]
        pub settings: BTreeMap<String, ParamValue>,
        /// The configuration ratios are taken against unless the reader picks one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub baseline: Option<String>,
        /// The noise floor of this experiment on this machine, from one
        /// configuration run twice (an A/A pair, interleaved with the rest):
        /// a ratio whose interval overlaps it is no measurable difference.
        /// Added in format 1.5.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub noise_floor: Option<NoiseFloor>,
        /// Why the experiment could not run here (e.g. an OOM probe on a CPU).
        /// An experiment that is not applicable has no configurations.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub not_applicable: Option<String>,
        #[serde(default)]
        pub configurations: Vec<Configuration>,
    }

    /// The kinds of experiment. A newer minor may add kinds; a reader shows
    /// one it does not know as a plain table.
    #[derive(Eq, Hash, PartialOrd, Ord)]
    #[serde(remote = "Self", rename_all = "snake_case")]
    pub enum ExperimentKind {
        Loader,
        Transfer,
        Compute,
        BatchSweep,
        OomProbe,
        Stall,
        /// A kind this build does not know, kept as written (accepted only
        /// from a bundle of a newer minor). Added in format 1.1.
        #[serde(skip)]
        Unknown(String),
    }

    /// A parameter value.
    #[serde(untagged)]
    pub enum ParamValue {
        Bool(bool),
        Int(i64),
        Float(f64),
        Text(String),
    }

    /// One point of an experiment's grid and everything measured for it.
    /// Build one with [`Configuration::new`] and its `with_*` methods.
    #[non_exhaustive]
    pub struct Configuration {
        pub id: String,
        pub label: String,
        #[serde(default)]
        pub params: BTreeMap<String, ParamValue>,
        /// Swept parameters that do not apply to this configuration, each with
        /// the reason (e.g. `prefetch` at `workers` 0: no worker holds batches
        /// ahead). Every name in the experiment's `swept` is in `params` or
        /// here, never in both. Added in format 1.1.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub not_applicable: BTreeMap<String, String>,
        /// Bytes of one collated batch (inputs and labels), when known; the
        /// prefetch memory estimate is this × workers × prefetch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub batch_bytes: Option<u64>,
        /// Whose loader and training loop produced the runs. Absent means
        /// `native`: every bundle before format 1.1 was written by the native
        /// runner ([`Configuration::engine_or_native`]). Added in format 1.1.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub engine: Option<Engine>,
        #[serde(default)]
        pub runs: Vec<Run>,
        /// Set when the configuration failed (OOM, worker error, ...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub failure: Option<Failure>,
        /// In a merged bundle of format 1.3: every rank's summary, column-wise;
        /// the runs are then the job's. Added in format 1.3.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub ranks: Option<RankColumns>,
        /// What the measured window forecasts for a full epoch and beyond
        /// (shared memory in flight, each worker's memory, the total), each
        /// figure against the machine's limit with its basis. Added in
        /// format 1.5.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub forecast: Option<Forecast>,
    }

    /// Whose data loader and training loop produced a configuration's runs.
    /// Added in format 1.1.
    #[derive(Eq, Hash, PartialOrd, Ord)]
    #[serde(remote = "Self", rename_all = "snake_case")]
    pub enum Engine {
        /// stallscope's own Rust loader and loop (libtorch or wgpu behind it).
        Native,
        /// PyTorch's `torch.utils.data.DataLoader` and a Python loop.
        Pytorch,
        /// SPDL's pipeline.
        Spdl,
        /// NVIDIA DALI's pipeline, through its PyTorch iterator. Added in
        /// format 1.4.
        Dali,
        /// torchdata.nodes (`ParallelMapper`, `Batcher`, `PinMemory`,
        /// `Prefetcher`). Added in format 1.4.
        Nodes,
        /// An engine this build does not know, kept as written (accepted only
        /// from a bundle of a newer minor).
        #[serde(skip)]
        Unknown(String),
    }

    /// How a run was timed. The two are never averaged together.
    #[derive(Eq, Hash, PartialOrd, Ord)]
    #[serde(remote = "Self", rename_all = "snake_case")]
    pub enum TimingMode {
        /// Synchronized once before and once after the epoch: judges whether
        /// a change helped.
        WholeRun,
        /// Synchronized at every stage boundary of every step: finds which
        /// stage waits; its totals are not performance.
        Diagnostic,
        /// A mode this build does not know, kept as written (accepted only
        /// from a bundle of a newer minor). Such runs are in no metric: they
        /// are never mixed with the known modes. Added in format 1.1.
        #[serde(skip)]
        Unknown(String),
    }

    /// Cold first epoch vs steady later ones.
    #[derive(Copy, Eq, Hash, PartialOrd, Ord)]
    #[serde(rename_all = "snake_case")]
    pub enum Phase {
        /// The first epoch: worker start-up, first reads, cold caches.
        Cold,
        /// Every later epoch (and measurements with no start-up at all).
        Steady,
    }

    /// One timed epoch (or one timed repetition of a probe).
    pub struct Run {
        /// Unique within the configuration.
        pub id: String,
        pub timing_mode: TimingMode,
        /// Repeat index, 0-based, in the order the repeats ran.
        pub repeat: u32,
        /// Epoch index within the repeat, 0-based.
        pub epoch: u32,
        pub phase: Phase,
        /// For published figures: the figure is the median of this many runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub summary_of: Option<u32>,
        /// Present exactly when `timing_mode` is `whole_run`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub whole_run: Option<WholeRun>,
        /// Present exactly when `timing_mode` is `diagnostic`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub diagnostic: Option<Diagnostic>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub memory: Option<Memory>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub loader: Option<LoaderStats>,
        /// Per-step timings (diagnostic runs only), column-wise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub steps: Option<StepSeries>,
        /// The rank that measured this run, in a merged multi-rank bundle.
        /// Added in format 1.2.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub rank: Option<u32>,
        /// CPU time the epoch cost, per process and worker thread. Added in
        /// format 1.2.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cost: Option<CpuCost>,
        /// Host (and GPU) counters sampled on a side thread during the epoch.
        /// Added in format 1.2.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub timeline: Option<Timeline>,
        /// A pooled run of a merged configuration: how it pools the ranks'
        /// runs (`analysis::pooled_runs`). The name `job` is the format's and
        /// stays: here it means the pooled run, not `stallscope job`'s
        /// command. Added in format 1.3.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub job: Option<JobOf>,
        /// The loader's workers in a diagnostic epoch: each batch and sample
        /// a worker built, and the batch each step took (`stallscope
        /// trace`). Added in format 1.4.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub worker_tracks: Option<WorkerTracks>,
    }

    /// Whole-run timing: synchronized only before and after.
    #[derive(Default)]
    pub struct WholeRun {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub seconds: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub samples: Option<u64>,
        /// Must equal samples / seconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub samples_per_s: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub steps: Option<u64>,
        /// Mean wall seconds per step without barriers (seconds ÷ steps).
        /// Published tables give it rounded; a reader derives it when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub step_s: Option<f64>,
        /// Bytes moved (transfer experiments); bytes / seconds is the bandwidth.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub bytes: Option<u64>,
    }

    /// Diagnostic timing: synchronized at every stage boundary.
    ///
    /// Stage statistics cover every step but the first, whose wait is
    /// `first_next_wait_s`; `step` is the per-step sum of the stages
    /// (next_wait, transfer, compute, and comm when present).
    #[derive(Default)]
    pub struct Diagnostic {
        /// Wall seconds of the whole diagnostic epoch, barriers included.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub seconds: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub samples: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub steps: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub bytes: Option<u64>,
        /// Time to create the iterator (`iter(loader)`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub iterator_creation_s: Option<f64>,
        /// The first `next()` wait, reported apart from the mean.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub first_next_wait_s: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub next_wait: Option<StageStat>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub transfer: Option<StageStat>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub compute: Option<StageStat>,
        /// Time in the per-step synchronisation of ranks (the collective or
        /// barrier), after compute; only in multi-rank runs. Added in format
        /// 1.2.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub comm: Option<StageStat>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub step: Option<StageStat>,
    }

    /// Statistics of one stage over the steps of a diagnostic run.
    #[derive(Default)]
    pub struct StageStat {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mean_s: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub median_s: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub p95_s: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub min_s: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_s: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub total_s: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub count: Option<u64>,
    }

    /// Memory counters of one run. Different things; each is labelled.
    ///
    /// **Peak** has one meaning (format 1.5): the highest resident set size
    /// within the measured window (a job's window, an engine's epoch), reset
    /// when the window opens; the main process's in `host_peak_rss_bytes`,
    /// the workers' apart in `workers_peak_rss_bytes`. The OS keeps no
    /// high-water mark of PSS or USS: those are the window's close, per
    /// process, in `processes`, beside the RSS. Bundles before 1.5 may hold
    /// other readings under the same names: the peer engines' `ru_maxrss`
    /// (never reset) and the job's (warm-up and window; the workers' last
    /// RSS summed).
    #[derive(Default)]
    pub struct Memory {
        /// The main process's peak resident set size within the measured
        /// window, reset when it opens (the process that iterates the
        /// loader: the runner, or a job's training process). Equal to the
        /// main process's `peak_rss_bytes` in `processes` when both are
        /// there.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub host_peak_rss_bytes: Option<u64>,
        /// The loader's worker processes: the sum of each one's own peak
        /// resident set size within the window (never their last value; an
        /// upper bound on what they held at once; pages they share, such as
        /// batches in shared memory, count in each). Equal to the sum of the
        /// workers' `peak_rss_bytes` in `processes` when every worker has
        /// one. Absent when the workers are threads (their memory is the
        /// main process's). Added in format 1.2.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub workers_peak_rss_bytes: Option<u64>,
        /// Caching allocator: peak bytes handed to tensors.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub device_peak_allocated_bytes: Option<u64>,
        /// Caching allocator: peak bytes held from the driver.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub device_peak_reserved_bytes: Option<u64>,
        /// The device's own view (`cudaMemGetInfo`): used = total − free.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub device_used_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub device_total_bytes: Option<u64>,
        /// Each process of a `stallscope job` window at its close (the
        /// training process, its DataLoader workers, any other child), from
        /// `/proc/PID/smaps_rollup`: where a worker's private memory grows
        /// (copy-on-read of a Python-object dataset under fork) it shows in
        /// its USS. Added in format 1.4.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub processes: Vec<ProcessMemory>,
    }

    /// One process's resident memory at the window's close, in bytes, and
    /// its peak within the window. USS ≤ PSS ≤ RSS ≤ peak RSS.
    #[derive(Default)]
    pub struct ProcessMemory {
        /// `main` (the process that iterates the loader), `worker` (one of
        /// its DataLoader's worker processes) or `child` (any other child,
        /// e.g. a forkserver or a resource tracker).
        pub role: String,
        /// The DataLoader worker's id, for a worker.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub worker_id: Option<u32>,
        /// Resident set size: every page in memory, shared ones included.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub rss_bytes: Option<u64>,
        /// Proportional set size: each shared page divided among its sharers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub pss_bytes: Option<u64>,
        /// Unique set size: pages this process alone holds (private clean +
        /// private dirty), what ending it would free.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub uss_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub swap_bytes: Option<u64>,
        /// Why a figure is missing (e.g. `smaps_rollup` unreadable).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub note: Option<String>,
        /// The process's peak resident set size within the window, reset
        /// when it opens (Linux: `clear_refs` 5, then `VmHWM`), read with
        /// the close's figures, so never below `rss_bytes`. For a process
        /// started within the window (a worker), its peak since it started.
        /// Added in format 1.5.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub peak_rss_bytes: Option<u64>,
        /// The USS when the window opened: with `uss_bytes`, the growth of
        /// the process's private memory within the window (a forked
        /// worker's copy-on-read grows it with every sample read). Added in
        /// format 1.5.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub uss_at_open_bytes: Option<u64>,
    }

    /// Per-step timings of a diagnostic run, one column per stage, integer
    /// nanoseconds; all columns have one entry per step.
    #[derive(Default)]
    pub struct StepSeries {
        pub next_wait_ns: Vec<u64>,
        pub transfer_ns: Vec<u64>,
        pub compute_ns: Vec<u64>,
        /// Time in the ranks' synchronisation per step; empty for a single
        /// process, else one entry per step. Added in format 1.2.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub comm_ns: Vec<u64>,
    }

    /// What the loader measured about itself (SPDL's metrics).
    #[derive(Default)]
    pub struct LoaderStats {
        /// From iterator creation to the first batch in the consumer's hands.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub time_to_first_batch_s: Option<f64>,
        /// Per pipeline stage (read, decode, transform, collate, pin).
        #[serde(default)]
        pub stages: Vec<LoaderStage>,
        /// Per queue between stages or to the consumer.
        #[serde(default)]
        pub queues: Vec<LoaderQueue>,
        /// Samples that could not be read or decoded.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub bad_samples: Vec<BadSample>,
    }

    /// One loader stage's tasks.
    pub struct LoaderStage {
        pub name: String,
        pub tasks: u64,
        #[serde(default)]
        pub failures: u64,
        /// Average task time in seconds (summed over workers / tasks).
        pub mean_task_s: f64,
    }

    /// One loader queue as its consumer saw it.
    pub struct LoaderQueue {
        pub name: String,
        pub gets: u64,
        /// Total seconds the consumer waited in `get`.
        pub get_wait_s: f64,
        /// Data readiness, 0..=1: for the native loader the share of gets
        /// that found an item ready; for SPDL its `occupancy_rate`, the
        /// share of the time measured that the queue held an item.
        pub readiness: f64,
    }

    /// A sample the loader could not use.
    pub struct BadSample {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub index: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub path: Option<String>,
        pub message: String,
    }

    /// Why a configuration failed. Recorded as a result, not a crash.
    #[serde(remote = "Self", tag = "kind", rename_all = "snake_case")]
    pub enum Failure {
        /// The device allocator refused an allocation.
        OutOfMemory(OomFailure),
        /// A loader worker failed.
        WorkerError {
            #[serde(default, skip_serializing_if = "Option::is_none")]
            worker: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            sample: Option<u64>,
            message: String,
        },
        /// The configuration panicked; later configurations still ran.
        Panic { message: String },
        /// Ctrl-C arrived while this configuration ran.
        Interrupted { message: String },
        /// Any other error.
        Error { message: String },
        /// The ranks' per-step synchronisation timed out: a rank died or
        /// stalled; or, without `timeout_s`, the ranks went out of step (a
        /// configuration failed on some ranks only). Added in format 1.2.
        CommTimeout {
            /// What timed out, e.g. `barrier at step 41 of epoch 1`.
            operation: String,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            timeout_s: Option<f64>,
            /// The ranks that had not arrived when it timed out.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            missing_ranks: Vec<u32>,
            message: String,
        },
        /// Not run: the forecast from a measured window said the
        /// configuration would not fit this machine's limits (shared memory
        /// in flight against `/dev/shm`, memory against the memory limit).
        /// Added in format 1.5.
        WouldNotFit {
            resource: Resource,
            /// The forecast's figure.
            needed_bytes: u64,
            /// What the machine has of it.
            available_bytes: u64,
            /// One sentence: the figure with its basis.
            message: String,
        },
        /// The configuration's process crashed (a bus error, a worker killed,
        /// OOM-killed, no space left); later configurations still ran.
        /// Added in format 1.5.
        Crashed {
            cause: CrashCause,
            /// The signal that ended the process, when one did.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            signal: Option<i32>,
            /// Its exit status, when it exited.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            exit_code: Option<i32>,
            /// One readable line: the cause and the error's telling line.
            message: String,
            /// The whole text (stderr's tail, the traceback), when there is one.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            detail: Option<String>,
        },
        /// The user's script raised an exception it did not catch: one
        /// readable line (its type, its text, the innermost frame in the
        /// user's own files, the steps done), and the whole traceback as
        /// Python printed it. Added in format 1.5.
        Script {
            /// One line: `ValueError: bad record 13, at train.py:42 in
            /// __getitem__; after 7 of 20 steps (... exit status 1)`.
            message: String,
            /// The exception's class name.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            exception: Option<String>,
            /// `file:line` of the innermost frame in the user's own files.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            at: Option<String>,
            /// The whole traceback (its last 20,000 characters).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            traceback: Option<String>,
        },
        /// A kind this build does not know, kept with its message when it has
        /// one (accepted only from a bundle of a newer minor; its other
        /// fields are not kept). Added in format 1.1.
        #[serde(skip)]
        Unknown {
            kind: String,
            message: Option<String>,
        },
    }

    /// A recorded out-of-memory error.
    #[derive(Default)]
    pub struct OomFailure {
        /// The per-process memory fraction in force.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub memory_fraction: Option<f64>,
        /// The allocator cap (total visible memory × fraction).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cap_bytes: Option<u64>,
        /// How much more the failing allocation asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub requested_bytes: Option<u64>,
        /// Allocated by tensors when it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub allocated_bytes: Option<u64>,
        /// Reserved by the allocator but not allocated when it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub reserved_unallocated_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub device_free_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub device_total_bytes: Option<u64>,
        /// The error text exactly as raised.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub message: Option<String>,
        /// Quantities quoted from the error text when the whole text is not
        /// available (published bundles), e.g. `17179869184.00 GiB`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub message_quantities: Vec<String>,
        /// Whether the numbers in the message fit the hardware
        /// (see `analysis::oom_plausibility`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub plausibility: Option<Plausibility>,
    }

    /// A check of an error message's numbers against the hardware.
    pub struct Plausibility {
        pub verdict: PlausibilityVerdict,
        #[serde(default)]
        pub findings: Vec<String>,
    }

    /// Outcome of a plausibility check.
    #[derive(Copy, Eq)]
    #[serde(rename_all = "snake_case")]
    pub enum PlausibilityVerdict {
        Plausible,
        Implausible,
        /// Nothing to check against (no device total, no quantities).
        Unknown,
    }
}
