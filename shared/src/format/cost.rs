//! What an epoch cost besides time (format 1.2): CPU-seconds per process and
//! worker thread, and the counters a side thread sampled during the epoch.

use serde::{Deserialize, Serialize};

format_type! {
    /// CPU time (user + system, from `/proc`) of one epoch.
    ///
    /// `cpu_s` is every process of the run together: the runner process with
    /// all its threads (worker threads included) plus each worker process.
    /// Thread parts are inside the runner process's figure, not added to it.
    #[derive(Default)]
    pub struct CpuCost {
        /// Wall seconds the counters covered (the timed epoch).
        pub wall_s: f64,
        /// CPU-seconds of every process of the run over `wall_s`.
        pub cpu_s: f64,
        /// `cpu_s` ÷ samples × 1,000, when the epoch had samples.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cpu_s_per_1000_samples: Option<f64>,
        /// The processes and worker threads, runner process first.
        #[serde(default)]
        pub parts: Vec<CpuPart>,
    }

    /// One process or thread's share of [`CpuCost`].
    pub struct CpuPart {
        /// e.g. `runner`, `worker 0`, `harness`.
        pub name: String,
        pub kind: CpuPartKind,
        pub user_s: f64,
        pub system_s: f64,
        /// Peak resident set size (processes only: `VmHWM`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub peak_rss_bytes: Option<u64>,
    }

    /// Whether a [`CpuPart`] is a process or a thread of the runner.
    #[derive(Copy, Eq)]
    #[serde(rename_all = "snake_case")]
    pub enum CpuPartKind {
        Process,
        Thread,
    }

    /// Counters sampled on a side thread (about 20 Hz) during a whole-run
    /// epoch; the sampler never touches the device queue. Every series has
    /// one entry per sample.
    #[derive(Default)]
    pub struct Timeline {
        /// The sampler's nominal interval in seconds.
        pub interval_s: f64,
        /// Milliseconds since the epoch started, per sample.
        pub t_ms: Vec<u32>,
        /// Steps the loop had finished by the sample (beside throughput).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub steps: Vec<u64>,
        /// Host CPU busy since the previous sample, in cores (1.5 = one and a
        /// half cores), over every process of the run.
        pub host_cpu_cores: Vec<f32>,
        /// Resident memory of every process of the run.
        pub host_rss_bytes: Vec<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub gpu: Option<GpuTimeline>,
        /// Why there are no GPU series (no NVML, not a CUDA device, ...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub gpu_not_available: Option<String>,
        /// CPU-seconds the sampler thread itself used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub sampler_cpu_s: Option<f64>,
    }

    /// GPU counters from NVML (and the caching allocator where the engine
    /// has one). A series NVML could not read is empty.
    #[derive(Default)]
    pub struct GpuTimeline {
        /// NVML's utilisation: the share of the last sample period in which
        /// any kernel ran (a clue, not a throughput).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub utilization_percent: Vec<u32>,
        /// Device memory used, NVML's view (every process).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub memory_used_bytes: Vec<u64>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub sm_clock_mhz: Vec<u32>,
        /// PCIe throughput, host to device, bytes/s.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub pcie_rx_bytes_per_s: Vec<u64>,
        /// PCIe throughput, device to host, bytes/s.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub pcie_tx_bytes_per_s: Vec<u64>,
        /// libtorch's caching allocator: bytes handed to tensors.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub allocated_bytes: Vec<u64>,
        /// libtorch's caching allocator: bytes held from the driver.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub reserved_bytes: Vec<u64>,
    }
}
