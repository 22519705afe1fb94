//! `transfer`: host-to-device copies by size, pageable vs pinned, blocking vs
//! non-blocking, each copy one step of the one loop
//! (`stallscope_core::run_epoch`). Whole-run: `copies` copies between two
//! synchronizations (bytes / seconds is the bandwidth). Diagnostic: each copy
//! synchronized. On the CPU there is no device to copy to: the experiment
//! then measures a host memory copy of the same size and says so.

use stallscope_bundle::{
    Configuration, Experiment, ExperimentKind, Memory, ParamValue, Run, TimingMode,
};
use tch::{Kind, Tensor};

use super::common::{GridExperiment, RunCtx, failed};
use crate::device::DeviceCtx;
use stallscope_core::{
    EpochSlot, EpochSteps, LoopError, Stages, Steps, Taken, UnitError,
    cost::GpuTarget,
    run_epoch,
    suite::{ExperimentPlan, ExperimentSpec},
};

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
        let mut src = Tensor::f_ones([elems], (Kind::Float, tch::Device::Cpu)).map_err(failed)?;
        if p.pinned {
            src = src.f_pin_memory(ctx.device).map_err(failed)?;
        }
        let host_dst = if self.on_cuda {
            None
        } else {
            Some(Tensor::f_zeros([elems], (Kind::Float, tch::Device::Cpu)).map_err(failed)?)
        };
        let mut steps = CopySteps {
            src,
            host_dst,
            ctx,
            non_blocking: p.non_blocking,
            copies: self.copies,
            size_bytes: p.size_bytes,
        };
        // Warm-up copy (allocation, first touch), untimed.
        drop(steps.copy_once()?);
        ctx.synchronize();
        let mut runs = Vec::new();
        for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
            for epoch in 0..self.epochs {
                rc.progress
                    .epoch(&self.id, &p.id(), repeat, mode.clone(), epoch);
                let slot = EpochSlot {
                    mode: mode.clone(),
                    repeat,
                    epoch,
                };
                runs.push(run_epoch(&mut steps, &slot, rc.stop)?);
                rc.progress.epoch_done();
            }
        }
        Ok(runs)
    }
}

/// The copy as the one loop's step: no batch to wait for, the copy, no
/// compute (its diagnostic column is recorded as zero, as the description
/// says, so the stages still sum to the step).
struct CopySteps<'a> {
    src: Tensor,
    /// On the CPU: the host buffer copied into.
    host_dst: Option<Tensor>,
    ctx: &'a DeviceCtx,
    non_blocking: bool,
    copies: u32,
    size_bytes: u64,
}

impl CopySteps<'_> {
    /// One copy: to the device (returned, so its block goes back to the
    /// caching allocator when dropped, without a synchronisation), or into
    /// the host buffer on the CPU.
    fn copy_once(&mut self) -> Result<Option<Tensor>, LoopError> {
        match self.host_dst.as_mut() {
            Some(dst) => {
                dst.f_copy_(&self.src)?;
                Ok(None)
            }
            None => Ok(Some(self.src.f_to_device_(
                self.ctx.device,
                Kind::Float,
                self.non_blocking,
                false,
            )?)),
        }
    }
}

impl Steps for CopySteps<'_> {
    fn synchronize(&mut self) -> Result<(), LoopError> {
        self.ctx.synchronize();
        Ok(())
    }

    fn start_epoch(
        &mut self,
        _: u32,
        _: &TimingMode,
    ) -> Result<Box<dyn EpochSteps + '_>, LoopError> {
        let left = self.copies;
        Ok(Box::new(CopyEpoch {
            steps: self,
            left,
            out: None,
        }))
    }

    fn stages(&self) -> Stages {
        Stages {
            transfer: true,
            compute: false,
        }
    }

    fn reset_device_peaks(&mut self) {
        self.ctx.reset_device_peaks();
    }

    fn device_memory(&mut self, memory: &mut Memory) {
        self.ctx.device_memory(memory);
    }

    fn gpu(&self) -> GpuTarget {
        self.ctx.gpu_target()
    }
}

struct CopyEpoch<'s, 'a> {
    steps: &'s mut CopySteps<'a>,
    left: u32,
    out: Option<Tensor>,
}

impl EpochSteps for CopyEpoch<'_, '_> {
    fn next(&mut self) -> Result<Option<Taken>, LoopError> {
        self.out = None;
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        Ok(Some(Taken {
            samples: 1,
            bytes: self.steps.size_bytes,
        }))
    }

    fn copy(&mut self) -> Result<(), LoopError> {
        self.out = self.steps.copy_once()?;
        Ok(())
    }

    fn compute(&mut self) -> Result<(), LoopError> {
        Ok(())
    }

    fn synchronize(&mut self) -> Result<(), LoopError> {
        self.steps.ctx.synchronize();
        Ok(())
    }
}
