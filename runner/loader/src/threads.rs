//! Worker threads: each runs its own queue of tasks with its own seeded
//! generator and sends finished batches (or its failure) to the consumer.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

use super::batch::{BatchBuilder, Host, Task, panic_text};
use super::os::{ThreadEnd, WorkerRegistry, current_tid};
use super::pool::BufferPool;
use super::rng::{Rng, worker_seed};
use super::sample::Source;
use super::worker_pool::{Event, Pool};
use super::{LoaderConfig, LoaderError, WorkerKind};

pub(crate) struct ThreadPool {
    tasks: Vec<Option<SyncSender<Task>>>,
    events: Receiver<Event>,
    handles: Vec<Option<JoinHandle<()>>>,
    stop: Arc<AtomicBool>,
}

fn name(worker: usize) -> String {
    format!("thread worker {worker}")
}

impl ThreadPool {
    pub(crate) fn start(
        config: &LoaderConfig,
        source: &Arc<dyn Source>,
        buffers: &Arc<BufferPool>,
        (registry, generation): (&WorkerRegistry, u64),
    ) -> Self {
        let (event_tx, events) = mpsc::channel();
        let mut tasks = Vec::new();
        let mut handles = Vec::new();
        let stop = Arc::new(AtomicBool::new(false));
        let (listed_tx, listed) = mpsc::channel::<()>();
        for worker in 0..config.workers {
            let (task_tx, task_rx) = mpsc::sync_channel::<Task>(config.prefetch);
            let source = Arc::clone(source);
            let buffers = Arc::clone(buffers);
            let event_tx: Sender<Event> = event_tx.clone();
            let cfg = config.clone();
            let stop = Arc::clone(&stop);
            let registry = registry.clone();
            let listed_tx = listed_tx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("stallscope-loader-{worker}"))
                .spawn(move || {
                    registry.started(generation, worker, WorkerKind::Threads, current_tid());
                    let _ = listed_tx.send(());
                    let _end = ThreadEnd {
                        registry: &registry,
                        generation,
                        worker,
                    };
                    run_worker(worker, &cfg, &*source, &buffers, task_rx, event_tx, &stop)
                })
                .expect("the OS starts a thread");
            tasks.push(Some(task_tx));
            handles.push(Some(handle));
        }
        // Every worker listed before the pool is handed out, so a reader
        // never misses one; waited for once, after all were spawned, so the
        // threads start together instead of one after another.
        drop(listed_tx);
        for _ in 0..config.workers {
            let _ = listed.recv();
        }
        ThreadPool {
            tasks,
            events,
            handles,
            stop,
        }
    }
}

fn run_worker(
    worker: usize,
    config: &LoaderConfig,
    source: &dyn Source,
    buffers: &BufferPool,
    tasks: Receiver<Task>,
    events: Sender<Event>,
    stop: &AtomicBool,
) {
    let builder = BatchBuilder {
        source,
        on_bad: config.on_bad_sample,
        fault: config.fault,
        host: Host::Thread,
        worker: Some(worker),
        buffers,
    };
    let mut epoch = None;
    let mut rng = Rng::new(0);
    for task in tasks {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if epoch != Some(task.epoch) {
            epoch = Some(task.epoch);
            rng = Rng::new(worker_seed(config.seed, worker, task.epoch));
        }
        // `build` catches panics inside a sample; this catches the rest, so a
        // worker never ends without telling the consumer why.
        let built = catch_unwind(AssertUnwindSafe(|| builder.build(&task, &mut rng, &())));
        let event = match built {
            Ok(Ok(batch)) => Event::Done(Box::new(batch)),
            Ok(Err(e)) => Event::Failed {
                worker: name(worker),
                sample: e.sample,
                message: e.message,
            },
            Err(panic) => Event::Failed {
                worker: name(worker),
                sample: None,
                message: format!(
                    "panicked between samples of batch {}: {}",
                    task.batch,
                    panic_text(&*panic)
                ),
            },
        };
        let failed = matches!(event, Event::Failed { .. });
        if events.send(event).is_err() || failed {
            return;
        }
    }
}

impl Pool for ThreadPool {
    fn submit(&mut self, worker: usize, task: Task) -> Result<(), LoaderError> {
        let sender = self.tasks[worker]
            .as_ref()
            .expect("sender lives until drop");
        sender.send(task).map_err(|_| LoaderError::Worker {
            worker: name(worker),
            sample: None,
            message: "the worker thread has stopped".into(),
        })
    }

    fn next_event(&mut self, block: bool) -> Option<Event> {
        if block {
            self.events.recv().ok()
        } else {
            self.events.try_recv().ok()
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for sender in &mut self.tasks {
            sender.take();
        }
        for handle in &mut self.handles {
            if let Some(h) = handle.take() {
                // A worker that panicked outside a sample already reported.
                let _ = h.join();
            }
        }
    }
}
