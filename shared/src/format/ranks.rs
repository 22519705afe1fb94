//! Ranks of a distributed run (format 1.2): one process's place in the
//! layout a launcher (torchrun, Slurm) gave it, and every rank's host in a
//! merged bundle.

use super::HostInfo;
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
}
