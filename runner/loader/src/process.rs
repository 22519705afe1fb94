//! Worker processes: started from the small `stallscope-loader-worker` binary,
//! each with a shared-memory ring of `prefetch` slots and a JSON-lines control
//! pipe. A dead worker is reported with the sample it was loading (read from
//! its progress word); on drop every child is ended and every segment unlinked.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::sync::Arc;

use super::batch::{Batch, Task};
use super::os::{WorkerRegistry, wait_with_usage};
use super::pool::BufferPool;
use super::shm::{SEGMENT_PREFIX, Segment, segment_len, slot_bytes};
use super::source::SourceSpec;
use super::stats::{Stage, StageTimes};
use super::trace::monotonic_ns;
use super::worker::{Assign, Reply, WorkerInit};
use super::worker_pool::{Event, Pool};
use super::{LoaderConfig, LoaderError, WorkerKind};

/// How long a new worker may take to say it is ready.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a worker whose pipe was closed may take to exit before SIGKILL.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Set in every worker process's environment to the runner's pid.
pub const PARENT_ENV: &str = "STALLSCOPE_LOADER_PARENT";

/// The worker binary's file name: a small program that links no libtorch,
/// so a worker starts in milliseconds.
pub const WORKER_PROGRAM: &str = "stallscope-loader-worker";

/// Names the worker binary explicitly (wins over the lookup beside the
/// running program).
pub const WORKER_PROGRAM_ENV: &str = "STALLSCOPE_LOADER_WORKER";

/// `name` beside the running program, else one folder up (cargo puts test
/// and bench binaries in `target/<profile>/deps/`): the path, or every place
/// tried. The outer error: the running program cannot be found.
#[allow(clippy::type_complexity)]
pub fn beside_running_program(
    name: &str,
) -> Result<Result<std::path::PathBuf, Vec<String>>, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find the running program to look beside it: {e}"))?;
    let mut tried = Vec::new();
    for dir in exe
        .parent()
        .into_iter()
        .flat_map(|d| [Some(d), d.parent()])
        .flatten()
    {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Ok(Ok(candidate));
        }
        tried.push(candidate.display().to_string());
    }
    Ok(Err(tried))
}

/// Where the worker binary is: `$STALLSCOPE_LOADER_WORKER`, else beside the
/// running program, else one folder up (cargo's test binaries live in
/// `target/<profile>/deps/`). The error says every place that was tried.
pub fn worker_program() -> Result<std::path::PathBuf, String> {
    if let Some(p) = std::env::var_os(WORKER_PROGRAM_ENV) {
        let p = std::path::PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "{WORKER_PROGRAM_ENV}={} is not a file; expected the {WORKER_PROGRAM} binary",
                p.display()
            ))
        };
    }
    let tried = match beside_running_program(WORKER_PROGRAM)? {
        Ok(found) => return Ok(found),
        Err(tried) => tried,
    };
    Err(format!(
        "the {WORKER_PROGRAM} binary was not found (looked at {}); build it with \
         `cargo build -p stallscope-loader` (or `cargo xtask build`), or set {WORKER_PROGRAM_ENV}",
        tried.join(", ")
    ))
}

static SEGMENT_COUNTER: AtomicU64 = AtomicU64::new(0);

enum Message {
    Reply(usize, Reply),
    Closed(usize),
}

struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    segment: Segment,
    free_slots: Vec<usize>,
    reader: Option<JoinHandle<()>>,
    exited: Option<ExitStatus>,
}

pub(crate) struct ProcessPool {
    workers: Vec<Worker>,
    messages: Receiver<Message>,
    slot_bytes: usize,
    per_sample: usize,
    sample_dims: Vec<usize>,
    /// Batches are copied out of shared memory into reused buffers.
    buffers: Arc<BufferPool>,
    /// Where each worker's PID and, once reaped, its usage are recorded.
    registry: WorkerRegistry,
    generation: u64,
}

fn name(worker: usize, pid: u32) -> String {
    format!("process worker {worker} (pid {pid})")
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig} ({})", signal_name(sig)),
        _ => status.to_string(),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGTERM => "SIGTERM",
        libc::SIGBUS => "SIGBUS",
        libc::SIGINT => "SIGINT",
        _ => "signal",
    }
}

impl ProcessPool {
    pub(crate) fn start(
        config: &LoaderConfig,
        spec: &SourceSpec,
        sample_dims: &[usize],
        buffers: &Arc<BufferPool>,
        (registry, generation): (&WorkerRegistry, u64),
    ) -> Result<Self, LoaderError> {
        let program = match &config.worker_program {
            Some(p) => p.clone(),
            None => worker_program().map_err(|message| LoaderError::Spawn {
                worker: "process workers".into(),
                message,
            })?,
        };
        let per_sample: usize = sample_dims.iter().product();
        let slot_bytes = slot_bytes(config.batch_size, per_sample);
        let len = segment_len(config.prefetch, slot_bytes);
        let (tx, messages) = mpsc::channel();
        let mut pool = ProcessPool {
            workers: Vec::new(),
            messages,
            slot_bytes,
            per_sample,
            sample_dims: sample_dims.to_vec(),
            buffers: Arc::clone(buffers),
            registry: registry.clone(),
            generation,
        };
        for w in 0..config.workers {
            let spawn_err = |message: String| LoaderError::Spawn {
                worker: format!("process worker {w}"),
                message,
            };
            let seg_name = format!(
                "{SEGMENT_PREFIX}{}-{w}-{}",
                std::process::id(),
                SEGMENT_COUNTER.fetch_add(1, Ordering::Relaxed)
            );
            let segment = Segment::create(seg_name.clone(), len)
                .map_err(|e| spawn_err(format!("shared memory /dev/shm/{seg_name}: {e}")))?;
            let mut child = Command::new(&program)
                // Lets people and tests tell whose worker a process is.
                .env(PARENT_ENV, std::process::id().to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| spawn_err(format!("{}: {e}", program.display())))?;
            registry.started(generation, w, WorkerKind::Processes, child.id());
            let stdout = child.stdout.take().expect("piped");
            let stdin = child.stdin.take();
            let reader = spawn_reader(w, stdout, tx.clone());
            pool.workers.push(Worker {
                child,
                stdin,
                segment,
                free_slots: (0..config.prefetch).rev().collect(),
                reader: Some(reader),
                exited: None,
            });
            let init = WorkerInit {
                worker: w,
                parent_pid: std::process::id(),
                spec: spec.clone(),
                sample_dims: sample_dims.to_vec(),
                on_bad: config.on_bad_sample,
                seed: config.seed,
                fault: config.fault,
                segment: seg_name,
                segment_len: len,
                slot_bytes,
            };
            pool.send_line(w, &init)
                .map_err(|e| spawn_err(format!("sending its start message: {e}")))?;
        }
        pool.await_ready()?;
        Ok(pool)
    }

    /// Wait for every worker's `Ready`, then unlink the segments' names: from
    /// here on nothing is left in /dev/shm even if the runner is killed.
    fn await_ready(&mut self) -> Result<(), LoaderError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut ready = vec![false; self.workers.len()];
        while ready.iter().any(|r| !r) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.messages.recv_timeout(left) {
                Ok(Message::Reply(w, Reply::Ready { .. })) => ready[w] = true,
                Ok(Message::Reply(w, other)) => {
                    return Err(LoaderError::Spawn {
                        worker: self.worker_name(w),
                        message: format!("expected a ready message, got {other:?}"),
                    });
                }
                Ok(Message::Closed(w)) => {
                    let status = self.reap(w);
                    return Err(LoaderError::Spawn {
                        worker: self.worker_name(w),
                        message: format!("it {} before it was ready", describe(status)),
                    });
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    let w = ready.iter().position(|r| !r).unwrap_or(0);
                    return Err(LoaderError::Spawn {
                        worker: self.worker_name(w),
                        message: format!("not ready after {} s", START_TIMEOUT.as_secs()),
                    });
                }
            }
        }
        for worker in &mut self.workers {
            worker.segment.unlink();
        }
        Ok(())
    }

    fn worker_name(&self, w: usize) -> String {
        name(w, self.workers[w].child.id())
    }

    fn send_line<T: serde::Serialize>(&mut self, w: usize, msg: &T) -> std::io::Result<()> {
        let stdin = self.workers[w]
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("pipe already closed"))?;
        let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
        line.push(b'\n');
        stdin.write_all(&line)?;
        stdin.flush()
    }

    /// Wait for a worker that closed its pipe (SIGKILL after a grace period);
    /// `wait4` also gives what it used, recorded for the runner's accounting.
    fn reap(&mut self, w: usize) -> ExitStatus {
        let worker = &mut self.workers[w];
        if let Some(status) = worker.exited {
            return status;
        }
        worker.stdin.take();
        let pid = worker.child.id();
        let deadline = Instant::now() + EXIT_GRACE;
        let reaped = loop {
            match wait_with_usage(pid, false) {
                Ok(Some(done)) => break Some(done),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                Ok(None) => {
                    let _ = worker.child.kill();
                    break wait_with_usage(pid, true).ok().flatten();
                }
                Err(_) => break None,
            }
        };
        let status = match reaped {
            Some((status, usage)) => {
                self.registry.ended(self.generation, w, usage);
                status
            }
            None => ExitStatus::from_raw(libc::SIGKILL),
        };
        self.workers[w].exited = Some(status);
        status
    }

    fn died(&mut self, w: usize) -> Event {
        let sample = self.workers[w].segment.loading_sample();
        let status = self.reap(w);
        let worker = self.worker_name(w);
        let place = sample
            .map(|s| format!(" while loading sample {s}"))
            .unwrap_or_else(|| " between samples".into());
        Event::Failed {
            worker,
            sample,
            message: format!("the worker process {}{place}", describe(status)),
        }
    }

    fn handle(&mut self, message: Message) -> Event {
        match message {
            Message::Reply(
                w,
                Reply::Done {
                    epoch,
                    batch,
                    slot,
                    times,
                    bad,
                    trace,
                },
            ) => {
                let from = trace.as_ref().map(|_| monotonic_ns());
                let start = Instant::now();
                let read = self.workers[w].segment.read_slot(
                    slot,
                    self.slot_bytes,
                    self.per_sample,
                    &self.buffers,
                );
                self.workers[w].free_slots.push(slot);
                match read {
                    Ok((sample_ids, labels, inputs)) => {
                        let mut times: StageTimes = times;
                        let took = start.elapsed();
                        times.add(Stage::Handover, took);
                        let trace = trace.map(|mut t| {
                            t.handover = from.map(|from| (from, took.as_nanos() as u64));
                            t
                        });
                        Event::Done(Box::new(Batch {
                            epoch,
                            index: batch,
                            sample_dims: self.sample_dims.clone(),
                            sample_ids,
                            labels,
                            inputs,
                            worker: Some(w),
                            times,
                            bad,
                            trace,
                        }))
                    }
                    Err(e) => Event::Failed {
                        worker: self.worker_name(w),
                        sample: None,
                        message: format!("its shared-memory slot {slot} is unreadable: {e}"),
                    },
                }
            }
            Message::Reply(w, Reply::Failed { sample, message }) => Event::Failed {
                worker: self.worker_name(w),
                sample,
                message,
            },
            Message::Reply(w, Reply::Ready { .. }) => Event::Failed {
                worker: self.worker_name(w),
                sample: None,
                message: "sent a second ready message".into(),
            },
            Message::Closed(w) => self.died(w),
        }
    }
}

fn spawn_reader(
    w: usize,
    stdout: std::process::ChildStdout,
    tx: Sender<Message>,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("stallscope-loader-pipe-{w}"))
        .spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Reply>(&line) {
                    Ok(reply) => {
                        if tx.send(Message::Reply(w, reply)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Message::Reply(
                            w,
                            Reply::Failed {
                                sample: None,
                                message: format!("unreadable control message {line:?}: {e}"),
                            },
                        ));
                        break;
                    }
                }
            }
            let _ = tx.send(Message::Closed(w));
        })
        .expect("the OS starts a thread")
}

impl Pool for ProcessPool {
    fn submit(&mut self, w: usize, task: Task) -> Result<(), LoaderError> {
        let slot = self.workers[w]
            .free_slots
            .pop()
            .expect("the schedule never has more than prefetch batches out per worker");
        if self.send_line(w, &Assign { task, slot }).is_err() {
            // The pipe broke: the worker is gone. Batches it finished before
            // are still in its stdout, ahead of the pipe's end, so they are
            // delivered first; its reader then sends `Closed`, which reports
            // how and where it died. (Failing here would drop them.)
            self.workers[w].stdin = None;
        }
        Ok(())
    }

    fn next_event(&mut self, block: bool) -> Option<Event> {
        let message = if block {
            self.messages.recv().ok()?
        } else {
            self.messages.try_recv().ok()?
        };
        Some(self.handle(message))
    }
}

impl Drop for ProcessPool {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            worker.stdin.take(); // EOF: an idle worker exits at once
        }
        for w in 0..self.workers.len() {
            self.reap(w);
        }
        for worker in &mut self.workers {
            if let Some(reader) = worker.reader.take() {
                let _ = reader.join();
            }
            worker.segment.unlink();
        }
    }
}
