//! Ranks of a distributed run (format 1.2): one process's place in the
//! layout a launcher (torchrun, Slurm) gave it, and every rank's host in a
//! merged bundle. Format 1.3: a merged configuration's per-rank summary as
//! columns ([`RankColumns`]), its runs the job's ([`JobOf`]), and the
//! per-rank step series in sidecar files ([`RankSidecar`]).

use super::{HostInfo, Phase, TimingMode};
use serde::{Deserialize, Serialize};

format_type! {
    /// One process's place among the ranks, as its launcher set it.
    #[derive(Default)]
    pub struct RankLayout {
        /// `torchrun`, `slurm` or `env` (RANK/WORLD_SIZE set by hand).
        pub launcher: String,
        pub rank: u32,
        pub world_size: u32,
        pub local_rank: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub local_world_size: Option<u32>,
        /// The node's index (Slurm's `SLURM_NODEID`, torchrun's `GROUP_RANK`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub node: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub job_id: Option<String>,
        pub master_addr: String,
        pub master_port: u16,
        /// This process's host name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub hostname: Option<String>,
        /// How the ranks synchronised each step, e.g. `tcpstore_barrier`.
        pub sync: String,
        /// How long a rank waits in the synchronisation before giving up.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub timeout_s: Option<f64>,
    }

    /// One rank of a merged bundle and the machine it ran on.
    pub struct RankHost {
        pub rank: u32,
        pub layout: RankLayout,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub host: Option<HostInfo>,
        /// The id of the per-rank bundle it came from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub bundle_id: Option<String>,
        /// The per-rank bundle's status message when it did not complete.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub status: Option<String>,
    }

    /// One configuration of a merged bundle, rank by rank, column-wise: entry
    /// i of every column is rank `rank[i]` (ascending). The configuration's
    /// runs are then the job's ([`JobOf`]); the ranks' own runs are summed
    /// up here and their per-step series are in `sidecars`. Added in format
    /// 1.3.
    pub struct RankColumns {
        /// The ranks of the job (the world size).
        pub world: u32,
        /// The phase the columns are read from (steady when there are any).
        pub phase: Phase,
        /// What `step_median_s` is of: whole-run when every rank has one,
        /// else diagnostic.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub step_mode: Option<TimingMode>,
        pub rank: Vec<u32>,
        /// Diagnostic steps the shares are read from.
        pub steps: Vec<u64>,
        pub step_median_s: Vec<Option<f64>>,
        /// Shares of the diagnostic step; per rank the four sum to 1.
        pub next_wait_share: Vec<Option<f64>>,
        pub transfer_share: Vec<Option<f64>>,
        pub compute_share: Vec<Option<f64>>,
        pub comm_share: Vec<Option<f64>>,
        /// Steps in which this rank was the one the others waited for.
        pub straggler_steps: Vec<u64>,
        /// The rank's own whole-run samples/s (median of its runs).
        pub samples_per_s: Vec<Option<f64>>,
        /// Steps aligned across every rank.
        pub steps_compared: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub imbalance: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub work_imbalance: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub verdict: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub notes: Vec<String>,
        /// The files holding the ranks' per-step series, one per stage.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub sidecars: Vec<RankSidecar>,
    }

    /// A file next to the merged bundle holding one stage's per-step series
    /// of every rank (`crate::sidecar`: binary, versioned, checksummed).
    /// Added in format 1.3.
    pub struct RankSidecar {
        /// `next_wait`, `transfer`, `compute` or `comm`.
        pub stage: String,
        /// The file's name, in the merged bundle's folder.
        pub file: String,
        pub bytes: u64,
        /// FNV-1a 64 of the file's bytes, 16 hex digits.
        pub fnv64: String,
    }

    /// How a pooled run of a merged configuration was made from its ranks'
    /// runs of one (timing mode, repeat, epoch). The name `JobOf` (and the
    /// field `Run.job`) is the format's and stays: it means the pooled run,
    /// not `stallscope job`'s command. Added in format 1.3.
    pub struct JobOf {
        /// Ranks whose runs it pools (every rank of the world).
        pub ranks: u32,
        /// Whole-run: the rank with the longest epoch, whose sampled
        /// timeline the run carries; diagnostic: the rank with the most work
        /// per step (comm left out), whose stage figures the run carries.
        pub slowest_rank: u32,
    }
}
