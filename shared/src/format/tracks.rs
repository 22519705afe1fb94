//! The loader's workers during one diagnostic epoch (format 1.4), for
//! `stallscope trace`: every batch a worker built with its samples and
//! their stages, and the batch each step of the loop took, as columns.

use serde::{Deserialize, Serialize};

fn is_zero(n: &u64) -> bool {
    *n == 0
}

format_type! {
    /// One diagnostic epoch's worker tracks. Times are integer nanoseconds
    /// since the loader's epoch started, on one clock (CLOCK_MONOTONIC,
    /// which worker threads and worker processes share); every column of a
    /// table has one entry per row. Recorded in diagnostic epochs only, and
    /// bounded: batches and samples past the cap are counted, not listed.
    /// Added in format 1.4.
    #[derive(Default)]
    pub struct WorkerTracks {
        /// How the workers ran: `threads` or `processes`.
        pub kind: String,
        /// Workers of the loader; every `batches.worker` is below it.
        pub workers: u32,
        /// Batches built that the cap left out of `batches`.
        #[serde(default, skip_serializing_if = "is_zero")]
        pub batches_left_out: u64,
        /// Samples of listed batches that the cap left out of `samples`.
        #[serde(default, skip_serializing_if = "is_zero")]
        pub samples_left_out: u64,
        pub batches: TrackBatches,
        #[serde(default)]
        pub samples: TrackSamples,
        pub steps: TrackSteps,
    }

    /// The batches the workers built, one row each, in the order they
    /// arrived at the consumer.
    #[derive(Default)]
    pub struct TrackBatches {
        /// The batch's position in the epoch (unique).
        pub batch: Vec<u64>,
        /// The worker that built it (0-based).
        pub worker: Vec<u32>,
        /// When the worker started it.
        pub start_ns: Vec<u64>,
        /// From its start until the worker finished it (for a worker
        /// process: written into shared memory).
        pub build_ns: Vec<u64>,
        /// Of `build_ns`, the batch-level collate (for a worker process,
        /// the write into shared memory included).
        pub collate_ns: Vec<u64>,
        /// When the consumer began copying it out of shared memory (worker
        /// processes only; empty otherwise).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub handover_start_ns: Vec<u64>,
        /// How long that copy took (worker processes only; empty otherwise).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub handover_ns: Vec<u64>,
        /// Samples the worker loaded for it (bad ones included).
        pub samples: Vec<u32>,
        /// The sample index it began with.
        pub first_sample: Vec<u64>,
        /// Its rows in [`TrackSamples`] (0 once the cap is reached): a
        /// batch's rows follow the rows of the batches listed before it.
        pub sample_rows: Vec<u32>,
    }

    /// The samples of the listed batches, one row each, in batch order.
    #[derive(Default)]
    pub struct TrackSamples {
        /// The sample's index in the dataset.
        pub index: Vec<u64>,
        /// When the worker began loading it.
        pub start_ns: Vec<u64>,
        /// Its stages (e.g. read, decode, transform), one after the other
        /// from `start_ns`; only stages some sample took time in.
        #[serde(default)]
        pub stages: Vec<TrackStage>,
        /// Rows of samples left out of their batch as bad.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub bad: Vec<u32>,
    }

    /// One stage's durations, one entry per sample row.
    pub struct TrackStage {
        pub name: String,
        pub ns: Vec<u64>,
    }

    /// The loop's steps, one row each: which batch it took, and when.
    #[derive(Default)]
    pub struct TrackSteps {
        /// The batch (its `batch`) the step's next-wait received.
        pub batch: Vec<u64>,
        /// When the loader handed that batch to the loop.
        pub delivered_ns: Vec<u64>,
    }
}
