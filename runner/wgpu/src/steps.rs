//! The wgpu back end's step in the parts the one loop
//! (`stallscope_core::run_epoch`) times: the next batch (from the native
//! loader, from batches collated in host memory, gathered in the loop, or
//! none when one batch stays resident on the device), its
//! `Queue::write_buffer` copy, the WGSL step's submit, and a wait on the
//! queue. The loop itself is not here.

use stallscope_bundle::{LoaderStats, TimingMode, WorkerTracks};
use stallscope_loader::{Batch, Loader, LoaderEpoch, LoaderError, WorkerRegistry};

use super::trainer::LinearTrainer;
use stallscope_core::{EpochSteps, LoopError, Steps, Taken, cost::GpuTarget};

/// A loader error as the bundle records it: a worker's failure names the
/// worker and the sample.
pub(crate) fn loader_failure(e: LoaderError) -> LoopError {
    match e {
        LoaderError::Worker { .. } | LoaderError::Spawn { .. } => {
            LoopError::Recorded(Box::new(e.to_failure()))
        }
        other => LoopError::Failed(other.to_string()),
    }
}

/// A batch collated before the clock, in the form the step writes.
pub struct HostBatch {
    pub x: Vec<f32>,
    pub y: Vec<u32>,
}

/// Where a loop takes its batches from.
pub enum Batches<'b> {
    /// The real loader.
    Loader(&'b mut Loader),
    /// Pre-collated batches in host memory (labels already as the shader's
    /// u32), written each step.
    Host(&'b [HostBatch]),
    /// One batch written to the device before the clock; the steps train
    /// on it with these row counts (no copy inside the epoch: only the
    /// step's 16 bytes of parameters when the row count changes).
    Resident(&'b [usize]),
    /// The in-loop loader (workers = 0): each batch's rows of `x` and `y`
    /// gathered into one buffer.
    Gather {
        x: &'b [f32],
        y: &'b [u32],
        features: usize,
        batches: &'b [Vec<u64>],
    },
}

/// The wgpu back end's side of the loop: the linear classifier's WGSL step
/// on `batches`.
pub struct WgpuSteps<'b, 'a> {
    pub trainer: &'b LinearTrainer<'a>,
    pub batches: Batches<'b>,
}

impl Steps for WgpuSteps<'_, '_> {
    fn synchronize(&mut self) -> Result<(), LoopError> {
        self.trainer.flush_copies();
        Ok(self.trainer.wait()?)
    }

    fn start_epoch(
        &mut self,
        epoch: u32,
        _mode: &TimingMode,
    ) -> Result<Box<dyn EpochSteps + '_>, LoopError> {
        let source = match &mut self.batches {
            Batches::Loader(l) => {
                Source::Loader(Box::new(l.start_epoch(epoch).map_err(loader_failure)?))
            }
            Batches::Host(h) => Source::Host(h.iter()),
            Batches::Resident(rows) => Source::Resident(rows.iter()),
            Batches::Gather {
                x,
                y,
                features,
                batches,
            } => Source::Gather {
                x,
                y,
                features: *features,
                batches: batches.iter(),
            },
        };
        Ok(Box::new(WgpuEpoch {
            source,
            trainer: self.trainer,
            current: Current::None,
            x: Vec::new(),
            y: Vec::new(),
            rows: 0,
            resident_rows: None,
        }))
    }

    fn loader_stats(&mut self) -> Option<LoaderStats> {
        match &self.batches {
            Batches::Loader(l) => l.last_stats(),
            _ => None,
        }
    }

    fn workers(&self) -> Option<WorkerRegistry> {
        match &self.batches {
            Batches::Loader(l) => Some(l.worker_registry()),
            _ => None,
        }
    }

    fn trace_workers(&mut self, on: bool) {
        if let Batches::Loader(l) = &mut self.batches {
            l.set_tracing(on);
        }
    }

    fn worker_tracks(&mut self) -> Option<WorkerTracks> {
        match &self.batches {
            Batches::Loader(l) => l.take_worker_tracks(),
            _ => None,
        }
    }

    fn gpu(&self) -> GpuTarget {
        GpuTarget::None("the wgpu back end does not map its adapter to an NVML device".into())
    }
}

enum Source<'e> {
    Loader(Box<LoaderEpoch>),
    Host(std::slice::Iter<'e, HostBatch>),
    Resident(std::slice::Iter<'e, usize>),
    Gather {
        x: &'e [f32],
        y: &'e [u32],
        features: usize,
        batches: std::slice::Iter<'e, Vec<u64>>,
    },
}

/// The batch the step works on.
enum Current<'e> {
    None,
    /// The loader's batch; its labels as u32 in `WgpuEpoch::y`.
    Loaded(Box<Batch>),
    Host(&'e HostBatch),
    /// Gathered into `WgpuEpoch::x` and `y`.
    Gathered,
    Resident,
}

struct WgpuEpoch<'e, 'a> {
    source: Source<'e>,
    trainer: &'e LinearTrainer<'a>,
    current: Current<'e>,
    x: Vec<f32>,
    y: Vec<u32>,
    rows: usize,
    resident_rows: Option<usize>,
}

fn taken(rows: usize, x: &[f32], y: &[u32]) -> Taken {
    Taken {
        samples: rows as u64,
        bytes: (x.len() * 4 + y.len() * 4) as u64,
    }
}

impl EpochSteps for WgpuEpoch<'_, '_> {
    fn next(&mut self) -> Result<Option<Taken>, LoopError> {
        self.current = Current::None;
        let t = match &mut self.source {
            Source::Loader(it) => {
                let Some(b) = it.next_batch() else {
                    return Ok(None);
                };
                let b = b.map_err(loader_failure)?;
                self.y.clear();
                self.y.extend(b.labels.iter().map(|&l| l as u32));
                self.rows = self.y.len();
                let t = taken(self.rows, &b.inputs, &self.y);
                self.current = Current::Loaded(Box::new(b));
                t
            }
            Source::Host(it) => {
                let Some(h) = it.next() else { return Ok(None) };
                self.rows = h.y.len();
                self.current = Current::Host(h);
                taken(self.rows, &h.x, &h.y)
            }
            Source::Resident(it) => {
                let Some(&n) = it.next() else { return Ok(None) };
                self.rows = n;
                self.current = Current::Resident;
                taken(n, &[], &[])
            }
            Source::Gather {
                x,
                y,
                features,
                batches,
            } => {
                let Some(ids) = batches.next() else {
                    return Ok(None);
                };
                gather(x, y, *features, ids, &mut self.x, &mut self.y);
                self.rows = ids.len();
                self.current = Current::Gathered;
                taken(self.rows, &self.x, &self.y)
            }
        };
        Ok(Some(t))
    }

    fn copy(&mut self) -> Result<(), LoopError> {
        let t = self.trainer;
        match &self.current {
            Current::Loaded(b) => t.write_batch(&b.inputs, &self.y),
            Current::Host(h) => t.write_batch(&h.x, &h.y),
            Current::Gathered => t.write_batch(&self.x, &self.y),
            Current::Resident => {
                if self.resident_rows != Some(self.rows) {
                    t.set_rows(self.rows as u32);
                    self.resident_rows = Some(self.rows);
                }
            }
            Current::None => unreachable!("copy after next"),
        }
        Ok(())
    }

    fn compute(&mut self) -> Result<(), LoopError> {
        self.trainer.submit_step(self.rows as u32);
        Ok(())
    }

    fn synchronize(&mut self) -> Result<(), LoopError> {
        self.trainer.flush_copies();
        Ok(self.trainer.wait()?)
    }
}

/// Gather the rows of one batch into contiguous host buffers (the in-loop
/// loader: workers = 0).
pub fn gather(
    x: &[f32],
    y: &[u32],
    features: usize,
    ids: &[u64],
    xb: &mut Vec<f32>,
    yb: &mut Vec<u32>,
) {
    xb.clear();
    yb.clear();
    for &i in ids {
        let i = i as usize;
        xb.extend_from_slice(&x[i * features..(i + 1) * features]);
        yb.push(y[i]);
    }
}
