//! What fits (format 1.5): the machine's real limits (usable CPUs under
//! affinity and a cgroup quota, the memory limit, `/dev/shm`), the forecast
//! a measured window makes for a full epoch and beyond, and the causes a
//! crashed configuration is recorded with. The rules that make the figures
//! are in `analysis::forecast` and docs/methodology.md ("Forecasts").

use serde::{Deserialize, Serialize};

format_type! {
    /// What this machine lets a run use, read when the run started.
    #[derive(Default)]
    pub struct HostLimits {
        /// CPUs the run can keep busy: the smaller of `affinity_cpus` and
        /// `cpu_quota_cores` rounded up (at least 1).
        pub usable_cpus: u32,
        /// CPUs in the process's affinity mask (`sched_getaffinity`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub affinity_cpus: Option<u32>,
        /// The cgroup CPU quota in cores (quota ÷ period), the smallest on
        /// the way from the process's cgroup to the root; absent when no
        /// quota is in force (`max`, `-1`) or none could be read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cpu_quota_cores: Option<f64>,
        /// The file the quota was read from: cgroup v2 `cpu.max`, or v1
        /// `cpu.cfs_quota_us` (with `cpu.cfs_period_us` beside it). Present
        /// exactly when `cpu_quota_cores` is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cpu_quota_source: Option<String>,
        /// The memory the run's processes may hold together before the
        /// kernel kills one: the cgroup limit, or the physical memory when
        /// no lower limit is in force.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub memory_limit_bytes: Option<u64>,
        /// Where `memory_limit_bytes` was read: cgroup v2 `memory.max`, v1
        /// `memory.limit_in_bytes` (their file), or `/proc/meminfo
        /// MemTotal` (physical memory). Present exactly when the limit is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub memory_limit_source: Option<String>,
        /// The size of `/dev/shm`, where DataLoader workers hand batches over.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub shm_total_bytes: Option<u64>,
        /// Its free space when the run started.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub shm_free_bytes: Option<u64>,
        /// PyTorch's sharing strategy in use (`file_descriptor`,
        /// `file_system`), when the job read it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub sharing_strategy: Option<String>,
        /// What could not be read, or was read as "no limit", one line each.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub notes: Vec<String>,
    }

    /// A configuration's forecast: what its measured window says about a
    /// full epoch and beyond, each figure against the limit it must fit.
    pub struct Forecast {
        /// Everything the forecast was made from.
        pub inputs: ForecastInputs,
        /// Batches in flight in `/dev/shm` (workers × prefetch_factor ×
        /// batch bytes, plus the step's batch when it is not pinned),
        /// against `/dev/shm`'s free space.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub shm_in_flight: Option<ForecastFigure>,
        /// Page-locked copies of those batches (`pin_memory`), counted in
        /// the memory totals; no limit of its own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub pinned: Option<ForecastFigure>,
        /// Median growth of a worker's USS per sample it read in the window
        /// (negative growth counts as none when extrapolating).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub worker_growth_per_sample_bytes: Option<f64>,
        /// The largest worker's USS at the end of a full epoch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub worker_epoch_end: Option<ForecastFigure>,
        /// The largest worker's USS once it has read every sample (persistent
        /// workers under a shuffling sampler, over many epochs); absent when
        /// it equals the epoch's end.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub worker_across_epochs: Option<ForecastFigure>,
        /// The main process, every worker, the shared memory and the pinned
        /// buffers at the epoch's end, against the memory limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub memory_epoch_end: Option<ForecastFigure>,
        /// The same across epochs (present with `worker_across_epochs`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub memory_across_epochs: Option<ForecastFigure>,
        /// Named when the workers' growth is clearly above the noise under
        /// the fork start method.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub copy_on_read: Option<CopyOnRead>,
        /// Whether every figure with a limit fits it; absent when no figure
        /// had a limit to be held to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub fits: Option<bool>,
        /// One sentence: it fits, or it would not and why.
        pub verdict: String,
    }

    /// One forecast figure.
    pub struct ForecastFigure {
        pub bytes: u64,
        /// The limit it is held to; absent when there is none to hold it to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub limit_bytes: Option<u64>,
        /// The figure with its basis, one sentence ("workers reach ~3.1 GiB
        /// each by the epoch's end: +610 KiB per sample read, copy-on-read").
        pub basis: String,
    }

    /// Copy-on-read named, with its growth and the known fixes.
    pub struct CopyOnRead {
        pub bytes_per_sample: f64,
        /// The fixes, one sentence.
        pub advice: String,
    }

    /// What a forecast reads from a measured window.
    #[derive(Default)]
    pub struct ForecastInputs {
        /// DataLoader worker processes (0: the main process loads).
        pub workers: u32,
        /// Batches each worker holds ahead (PyTorch's default is 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub prefetch_factor: Option<u32>,
        /// Bytes of one collated batch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub batch_bytes: Option<u64>,
        #[serde(default)]
        pub pin_memory: bool,
        #[serde(default)]
        pub persistent_workers: bool,
        /// `fork`, `spawn` or `forkserver`, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub start_method: Option<String>,
        /// Whether the sampler shuffles (each epoch a worker reads other
        /// samples), when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub shuffle: Option<bool>,
        /// Samples in the dataset (`len(dataset)`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub dataset_len: Option<u64>,
        /// Samples the loader delivered before the window opened (warm-up).
        #[serde(default)]
        pub samples_before_window: u64,
        /// Samples the loader delivered within the window.
        pub samples_in_window: u64,
        /// The main process's peak RSS in the window (else its RSS at the
        /// close).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub main_rss_bytes: Option<u64>,
        /// Each worker's USS at the window's open and close.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub workers_uss: Vec<WorkerWindow>,
    }

    /// One worker's private memory over the window.
    pub struct WorkerWindow {
        pub worker_id: u32,
        pub uss_at_open_bytes: u64,
        pub uss_bytes: u64,
    }

    /// What a configuration would not fit. A newer minor may add more.
    #[derive(Eq, Hash)]
    #[serde(remote = "Self", rename_all = "snake_case")]
    pub enum Resource {
        /// `/dev/shm`, where worker processes hand batches over.
        SharedMemory,
        /// The memory limit (cgroup, else physical).
        Memory,
        /// A resource this build does not know, kept as written (accepted
        /// only from a bundle of a newer minor).
        #[serde(skip)]
        Unknown(String),
    }

    /// Why a configuration's process crashed, from PyTorch's text and the
    /// signal (`analysis::crash_cause`). A newer minor may add more.
    #[derive(Eq, Hash)]
    #[serde(remote = "Self", rename_all = "snake_case")]
    pub enum CrashCause {
        /// `/dev/shm` ran out: a worker's bus error, "unable to allocate
        /// shared memory", a write to a `/torch_*` file with no space left.
        SharedMemory,
        /// A DataLoader worker was killed by a signal (other than SIGKILL,
        /// SIGBUS) or exited unexpectedly.
        WorkerSignal,
        /// Out of memory, or most likely so: the kernel's OOM kill, a refused
        /// allocation (`MemoryError`), or SIGKILL (exit 137, the OOM killer's
        /// signal, which others may send too: the one line says how sure).
        OomKilled,
        /// "No space left on device" on a disk (not `/dev/shm`).
        NoSpace,
        /// Anything else.
        Other,
        /// A cause this build does not know, kept as written (accepted only
        /// from a bundle of a newer minor).
        #[serde(skip)]
        Unknown(String),
    }
}
