//! The worker process (`stallscope-loader-worker`): its control protocol
//! with the runner (JSON lines over stdin/stdout: indices and slot numbers,
//! never batch bytes) and its main loop.

use std::io::{self, BufRead, Write};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::batch::{BatchBuilder, Host, OnBadSample, Progress, Task};
use super::pool::BufferPool;
use super::rng::{Rng, worker_seed};
use super::sample::SampleError;
use super::shm::Segment;
use super::source::{Fault, SourceSpec, open_source};
use super::stats::{Stage, StageTimes};
use super::trace::{BatchTrace, monotonic_ns};

/// The first line the runner sends a new worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WorkerInit {
    pub worker: usize,
    pub parent_pid: u32,
    pub spec: SourceSpec,
    pub sample_dims: Vec<usize>,
    pub on_bad: OnBadSample,
    pub seed: u64,
    pub fault: Option<Fault>,
    pub segment: String,
    pub segment_len: usize,
    pub slot_bytes: usize,
}

/// A task and the slot its batch goes into.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Assign {
    pub task: Task,
    pub slot: usize,
}

/// What a worker tells the runner.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Reply {
    Ready {
        pid: u32,
    },
    Done {
        epoch: u32,
        batch: u64,
        slot: usize,
        times: StageTimes,
        bad: Vec<SampleError>,
        /// The batch's trace, when its task asked for one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<Box<BatchTrace>>,
    },
    Failed {
        sample: Option<u64>,
        message: String,
    },
}

/// Why a worker process could not serve.
#[derive(Debug, thiserror::Error)]
pub enum WorkerProcessError {
    #[error("loader worker: reading the control pipe: {0}")]
    Pipe(#[from] io::Error),
    #[error("loader worker: line {line} of the control pipe is not a valid message: {message}")]
    Protocol { line: usize, message: String },
    #[error("loader worker: {0}")]
    Setup(String),
}

struct SegmentProgress<'a>(&'a Segment);

impl Progress for SegmentProgress<'_> {
    fn loading(&self, sample: Option<u64>) {
        self.0.set_progress(sample);
    }
}

fn send(out: &mut impl Write, reply: &Reply) -> io::Result<()> {
    serde_json::to_writer(&mut *out, reply).map_err(io::Error::other)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Main loop of a worker process; returns when the runner closes the pipe.
pub fn worker_main() -> Result<(), WorkerProcessError> {
    // Die with the runner, whatever way it ends: no orphans.
    // SAFETY: prctl with these arguments only sets a flag on this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let stdin = io::stdin().lock();
    let mut out = io::stdout().lock();
    let mut lines = stdin.lines();
    let protocol = |line: usize, e: serde_json::Error| WorkerProcessError::Protocol {
        line,
        message: e.to_string(),
    };
    let first = lines
        .next()
        .ok_or_else(|| WorkerProcessError::Setup("no start message on stdin".into()))??;
    let init: WorkerInit = serde_json::from_str(&first).map_err(|e| protocol(1, e))?;
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } as u32 != init.parent_pid {
        return Err(WorkerProcessError::Setup(
            "the runner is already gone".into(),
        ));
    }
    let source = open_source(&init.spec).map_err(|e| WorkerProcessError::Setup(e.to_string()))?;
    if source.sample_dims() != init.sample_dims {
        return Err(WorkerProcessError::Setup(format!(
            "the source's samples are {:?} here, {:?} in the runner",
            source.sample_dims(),
            init.sample_dims
        )));
    }
    let mut segment = Segment::open(&init.segment, init.segment_len)
        .map_err(|e| WorkerProcessError::Setup(format!("shared memory {}: {e}", init.segment)))?;
    send(
        &mut out,
        &Reply::Ready {
            pid: std::process::id(),
        },
    )?;
    // The worker's own batch buffers, reused once copied into shared memory.
    let buffers = BufferPool::new(2);
    let builder = BatchBuilder {
        source: &*source,
        on_bad: init.on_bad,
        fault: init.fault,
        host: Host::Process,
        worker: Some(init.worker),
        buffers: &buffers,
    };
    let mut epoch = None;
    let mut rng = Rng::new(0);
    for (n, line) in lines.enumerate() {
        let assign: Assign = serde_json::from_str(&line?).map_err(|e| protocol(n + 2, e))?;
        let task = assign.task;
        if epoch != Some(task.epoch) {
            epoch = Some(task.epoch);
            rng = Rng::new(worker_seed(init.seed, init.worker, task.epoch));
        }
        let built = builder.build(&task, &mut rng, &SegmentProgress(&segment));
        let reply = match built {
            Ok(batch) => {
                let start = Instant::now();
                segment.write_slot(
                    assign.slot,
                    init.slot_bytes,
                    &batch.sample_ids,
                    &batch.labels,
                    &batch.inputs,
                )?;
                let mut times = batch.times;
                buffers.give(batch.inputs);
                // Writing into shared memory is the rest of this batch's collate.
                times.extend(Stage::Collate, start.elapsed());
                let trace = batch.trace.map(|mut t| {
                    t.end_ns = monotonic_ns();
                    t
                });
                Reply::Done {
                    epoch: task.epoch,
                    batch: task.batch,
                    slot: assign.slot,
                    times,
                    bad: batch.bad,
                    trace,
                }
            }
            Err(e) => Reply::Failed {
                sample: e.sample,
                message: e.message,
            },
        };
        let failed = matches!(reply, Reply::Failed { .. });
        send(&mut out, &reply)?;
        if failed {
            break;
        }
    }
    Ok(())
}
