//! `transfer`: host-to-device copies by size, pageable vs pinned, blocking vs
//! non-blocking. Whole-run: `copies` copies between two synchronizations
//! (bytes / seconds is the bandwidth). Diagnostic: each copy synchronized.
//! On the CPU there is no device to copy to: the experiment then measures a
//! host memory copy of the same size and says so.

use std::sync::atomic::Ordering;
use std::time::Instant;

use stallscope_bundle::{
    Configuration, Experiment, ExperimentKind, ParamValue, Phase, Run, StepSeries, TimingMode,
    WholeRun,
};
use tch::{Kind, Tensor};

use super::{GridExperiment, RunCtx, UnitError};
use crate::suite::{ExperimentPlan, ExperimentSpec};
use crate::train::{EpochSlot, diagnostic_from_series};

pub struct Transfer {
    id: String,
    title: Option<String>,
    epochs: u32,
    copies: u32,
    grid: Vec<Point>,
    on_cuda: bool,
}

#[derive(Debug, Clone, Copy)]
struct Point {
    size_bytes: u64,
    pinned: bool,
    non_blocking: bool,
}

impl Point {
    fn id(&self) -> String {
        format!(
            "{}k-{}-{}",
            self.size_bytes / 1024,
            if self.pinned { "pinned" } else { "pageable" },
            if self.non_blocking {
                "nonblocking"
            } else {
                "blocking"
            }
        )
    }
}

impl Transfer {
    pub fn new(plan: &ExperimentPlan, rc: &RunCtx) -> Transfer {
        let ExperimentSpec::Transfer {
            sizes_bytes,
            copies,
            pinned,
            non_blocking,
        } = &plan.spec
        else {
            unreachable!("Transfer::new is called for transfer plans only")
        };
        let on_cuda = rc.device.is_cuda();
        let mut grid = Vec::new();
        for &size_bytes in sizes_bytes {
            if on_cuda {
                for &p in pinned {
                    for &nb in non_blocking {
                        grid.push(Point {
                            size_bytes,
                            pinned: p,
                            non_blocking: nb,
                        });
                    }
                }
            } else {
                grid.push(Point {
                    size_bytes,
                    pinned: false,
                    non_blocking: false,
                });
            }
        }
        Transfer {
            id: plan.id.clone(),
            title: plan.title.clone(),
            epochs: plan.epochs,
            copies: *copies,
            grid,
            on_cuda,
        }
    }
}

impl GridExperiment for Transfer {
    fn skeleton(&self) -> Experiment {
        let description = if self.on_cuda {
            format!(
                "Each run copies a float32 host tensor of the given size to the device {} times. Whole-run: one synchronization before and one after all copies; bytes / seconds is the bandwidth. Diagnostic: every copy is followed by a synchronization (its 'transfer' stage); the 'next_wait' stage is the loop's hand-over of the source buffer and there is no compute stage (zero). A non-blocking copy from pageable memory is staged by the driver and does not overlap.",
                self.copies
            )
        } else {
            format!(
                "On the CPU there is no host-to-device copy: each run copies a float32 host tensor of the given size into another host tensor (Tensor::copy_) {} times, which is a memory-bandwidth figure, not a PCIe one. Pinned memory and non-blocking copies need a CUDA device and are not measured here. Diagnostic: every copy timed on its own ('transfer'); 'next_wait' is the loop's hand-over of the source buffer; there is no compute stage (zero).",
                self.copies
            )
        };
        Experiment {
            description: Some(description),
            swept: vec!["size_bytes".into(), "pinned".into(), "non_blocking".into()],
            settings: [
                ("copies_per_run".to_string(), ParamValue::from(self.copies)),
                ("dtype".to_string(), "float32".into()),
                (
                    "copy".to_string(),
                    if self.on_cuda {
                        "host to device"
                    } else {
                        "host to host (no device)"
                    }
                    .into(),
                ),
            ]
            .into(),
            baseline: self.grid.first().map(Point::id),
            not_applicable: None,
            configurations: self
                .grid
                .iter()
                .map(|p| {
                    let label = format!(
                        "{} KiB, {}, {}",
                        p.size_bytes / 1024,
                        if p.pinned { "pinned" } else { "pageable" },
                        if p.non_blocking {
                            "non-blocking"
                        } else {
                            "blocking"
                        }
                    );
                    Configuration::new(p.id(), label)
                        .with_param("size_bytes", ParamValue::Int(p.size_bytes as i64))
                        .with_param("pinned", p.pinned)
                        .with_param("non_blocking", p.non_blocking)
                        .with_batch_bytes(p.size_bytes)
                })
                .collect(),
            ..Experiment::new(
                self.id.clone(),
                ExperimentKind::Transfer,
                self.title
                    .clone()
                    .unwrap_or_else(|| "Host-to-device copies".into()),
            )
        }
    }

    fn epochs_per_unit(&self) -> u64 {
        2 * u64::from(self.epochs)
    }

    fn run_unit(&mut self, index: usize, repeat: u32, rc: &RunCtx) -> Result<Vec<Run>, UnitError> {
        let p = self.grid[index];
        let ctx = rc.device;
        let elems = (p.size_bytes / 4) as i64;
        let mut src = Tensor::f_ones([elems], (Kind::Float, tch::Device::Cpu))?;
        if p.pinned {
            src = src.f_pin_memory(ctx.device)?;
        }
        let mut host_dst = if self.on_cuda {
            None
        } else {
            Some(Tensor::f_zeros([elems], (Kind::Float, tch::Device::Cpu))?)
        };
        let mut copy_once = || -> Result<Option<Tensor>, UnitError> {
            match host_dst.as_mut() {
                Some(dst) => {
                    dst.f_copy_(&src)?;
                    Ok(None)
                }
                None => Ok(Some(src.f_to_device_(
                    ctx.device,
                    Kind::Float,
                    p.non_blocking,
                    false,
                )?)),
            }
        };
        // Warm-up copy (allocation, first touch), untimed.
        drop(copy_once()?);
        ctx.synchronize();
        let mut runs = Vec::new();
        for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
            for epoch in 0..self.epochs {
                rc.progress
                    .epoch(&self.id, &p.id(), repeat, mode.clone(), epoch);
                ctx.reset_peaks();
                let slot = EpochSlot {
                    mode: mode.clone(),
                    repeat,
                    epoch,
                };
                let mut run = Run::new(
                    slot.run_id(),
                    mode.clone(),
                    repeat,
                    epoch,
                    if epoch == 0 {
                        Phase::Cold
                    } else {
                        Phase::Steady
                    },
                );
                let copies = u64::from(self.copies);
                let bytes = copies * p.size_bytes;
                match &mode {
                    TimingMode::WholeRun => {
                        ctx.synchronize();
                        let t0 = Instant::now();
                        for _ in 0..self.copies {
                            // Dropping a device tensor returns its block to the
                            // caching allocator without synchronizing.
                            drop(copy_once()?);
                        }
                        ctx.synchronize();
                        let seconds = t0.elapsed().as_secs_f64();
                        run.whole_run = Some(WholeRun {
                            seconds: Some(seconds),
                            samples: Some(copies),
                            samples_per_s: Some(copies as f64 / seconds),
                            steps: Some(copies),
                            step_s: Some(seconds / copies as f64),
                            bytes: Some(bytes),
                        });
                    }
                    TimingMode::Diagnostic => {
                        let mut s = StepSeries::default();
                        ctx.synchronize();
                        let started = Instant::now();
                        let mut prev = Instant::now();
                        for _ in 0..self.copies {
                            let t1 = Instant::now();
                            let out = copy_once()?;
                            ctx.synchronize();
                            let t2 = Instant::now();
                            drop(out);
                            s.next_wait_ns.push((t1 - prev).as_nanos() as u64);
                            s.transfer_ns.push((t2 - t1).as_nanos() as u64);
                            s.compute_ns.push(0);
                            prev = Instant::now();
                        }
                        let seconds = started.elapsed().as_secs_f64();
                        // No compute stage: its column is recorded as zero
                        // (as the description says), so the stages still sum
                        // to the step.
                        run.diagnostic =
                            Some(diagnostic_from_series(&s, seconds, copies, bytes, None));
                        run.steps = Some(s);
                    }
                    TimingMode::Unknown(_) => {
                        unreachable!("the runner times whole_run and diagnostic only")
                    }
                }
                run.memory = Some(ctx.memory());
                rc.progress.epoch_done();
                runs.push(run);
                if rc.stop.load(Ordering::Relaxed) {
                    return Err(UnitError::Interrupted);
                }
            }
        }
        Ok(runs)
    }
}
