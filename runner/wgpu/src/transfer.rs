//! Host-to-device copies on wgpu (`Queue::write_buffer` into a device
//! buffer), reported as bytes per second per size, each copy one step of the
//! one loop (`stallscope_core::run_epoch`): whole-run queues every copy and
//! waits once; diagnostic waits after each.

use stallscope_bundle::{Configuration, Experiment, ExperimentKind, ParamValue, Run, TimingMode};

use super::WgpuCtx;
use stallscope_core::{
    Driven, EpochSlot, EpochSteps, LoopError, Stages, Steps, Taken, UnitCtx, UnitError,
    cost::GpuTarget, run_epoch,
};

/// What to run.
#[derive(Debug, Clone)]
pub struct TransferPlan {
    pub sizes_bytes: Vec<u64>,
    /// Copies per run.
    pub copies: u32,
    /// Timed epochs per mode (the first cold, the rest steady).
    pub epochs: u32,
}

/// One size's copies as the one loop's steps: no batch to wait for, the
/// copy (`write_buffer` and a submit), no compute (its diagnostic column is
/// zero, as the description says).
struct WriteSteps<'c> {
    ctx: &'c WgpuCtx,
    buf: wgpu::Buffer,
    host: Vec<u8>,
    copies: u32,
}

impl WriteSteps<'_> {
    fn write(&self) {
        self.ctx.queue.write_buffer(&self.buf, 0, &self.host);
        self.ctx.queue.submit(std::iter::empty());
    }
}

impl Steps for WriteSteps<'_> {
    fn synchronize(&mut self) -> Result<(), LoopError> {
        Ok(self.ctx.wait()?)
    }

    fn start_epoch(
        &mut self,
        _: u32,
        _: &TimingMode,
    ) -> Result<Box<dyn EpochSteps + '_>, LoopError> {
        let left = self.copies;
        Ok(Box::new(WriteEpoch { steps: self, left }))
    }

    fn stages(&self) -> Stages {
        Stages {
            transfer: true,
            compute: false,
        }
    }

    fn gpu(&self) -> GpuTarget {
        GpuTarget::None("the wgpu back end does not map its adapter to an NVML device".into())
    }
}

struct WriteEpoch<'s, 'c> {
    steps: &'s WriteSteps<'c>,
    left: u32,
}

impl EpochSteps for WriteEpoch<'_, '_> {
    fn next(&mut self) -> Result<Option<Taken>, LoopError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        Ok(Some(Taken {
            samples: 1,
            bytes: self.steps.host.len() as u64,
        }))
    }

    fn copy(&mut self) -> Result<(), LoopError> {
        self.steps.write();
        Ok(())
    }

    fn compute(&mut self) -> Result<(), LoopError> {
        Ok(())
    }

    fn synchronize(&mut self) -> Result<(), LoopError> {
        Ok(self.steps.ctx.wait()?)
    }
}

fn one_size(
    ctx: &WgpuCtx,
    plan: &TransferPlan,
    size: u64,
    repeat: u32,
    cx: &UnitCtx,
    experiment: &str,
    cid: &str,
) -> Result<Vec<Run>, UnitError> {
    if size > ctx.limits.max_buffer_size {
        return Err(UnitError::Failed(format!(
            "{size} bytes exceed the device's largest buffer ({} bytes)",
            ctx.limits.max_buffer_size
        )));
    }
    let size = size.div_ceil(4) * 4;
    let steps = &mut WriteSteps {
        ctx,
        buf: ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("transfer"),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }),
        host: (0..size).map(|i| (i % 251) as u8).collect(),
        copies: plan.copies,
    };
    // Warm-up copy outside the timed region.
    steps.write();
    ctx.wait().map_err(LoopError::from)?;
    let mut runs = Vec::new();
    for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
        for epoch in 0..plan.epochs {
            cx.progress
                .epoch(experiment, cid, repeat, mode.clone(), epoch);
            let slot = EpochSlot {
                mode: mode.clone(),
                repeat,
                epoch,
            };
            runs.push(run_epoch(steps, &slot, cx.stop)?);
            cx.progress.epoch_done();
        }
    }
    Ok(runs)
}

/// The `transfer` experiment on wgpu: one configuration per size, run unit
/// by unit by the driver.
pub struct WgpuTransfer<'a> {
    ctx: &'a WgpuCtx,
    plan: TransferPlan,
    experiment: Experiment,
}

impl<'a> WgpuTransfer<'a> {
    pub fn new(ctx: &'a WgpuCtx, id: &str, title: &str, plan: TransferPlan) -> Self {
        let experiment = Experiment {
            description: Some(format!(
                "Queue::write_buffer from host memory into a device buffer on {} ({:?}); wgpu stages the copy itself, so there is no pageable/pinned or stream choice here. The diagnostic compute stage is empty (no kernel runs).",
                ctx.info.name, ctx.info.backend
            )),
            swept: vec!["size_bytes".into()],
            settings: [
                ("backend".to_string(), ParamValue::from("wgpu")),
                ("copies".to_string(), ParamValue::from(plan.copies)),
            ]
            .into_iter()
            .collect(),
            baseline: plan.sizes_bytes.first().map(|s| format!("size{s}")),
            not_applicable: None,
            configurations: plan
                .sizes_bytes
                .iter()
                .map(|s| {
                    Configuration::new(
                        format!("size{s}"),
                        stallscope_bundle::analysis::show_bytes(*s as f64),
                    )
                    .with_param("size_bytes", ParamValue::Int(*s as i64))
                    .with_batch_bytes(*s)
                })
                .collect(),
            ..Experiment::new(id.to_string(), ExperimentKind::Transfer, title.to_string())
        };
        WgpuTransfer {
            ctx,
            plan,
            experiment,
        }
    }
}

impl Driven for WgpuTransfer<'_> {
    fn skeleton(&self) -> Experiment {
        self.experiment.clone()
    }

    fn epochs_per_unit(&self) -> u64 {
        2 * u64::from(self.plan.epochs)
    }

    fn run_unit(&mut self, index: usize, repeat: u32, cx: &UnitCtx) -> Result<Vec<Run>, UnitError> {
        let e = &self.experiment;
        let size = self.plan.sizes_bytes[index];
        one_size(
            self.ctx,
            &self.plan,
            size,
            repeat,
            cx,
            &e.id,
            &e.configurations[index].id,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_timed_in_both_modes_per_size() {
        let ctx = WgpuCtx::new().expect("a wgpu adapter");
        let plan = TransferPlan {
            sizes_bytes: vec![4096, 1 << 20],
            copies: 8,
            epochs: 2,
        };
        let mut t = WgpuTransfer::new(&ctx, "transfer_wgpu", "copies", plan);
        let (e, outcome) = stallscope_core::drive_alone(&mut t, 1);
        assert_eq!(outcome, stallscope_core::Outcome::Finished { failures: 0 });
        for c in &e.configurations {
            assert!(c.failure.is_none(), "{:?}", c.failure);
            let w = c
                .runs
                .iter()
                .find(|r| r.timing_mode == TimingMode::WholeRun)
                .unwrap();
            let w = w.whole_run.as_ref().unwrap();
            assert_eq!(w.bytes, Some(8 * c.batch_bytes.unwrap()));
            assert!(w.seconds.unwrap() > 0.0);
            let d = c
                .runs
                .iter()
                .find(|r| r.timing_mode == TimingMode::Diagnostic)
                .unwrap();
            assert!(
                d.diagnostic
                    .as_ref()
                    .unwrap()
                    .transfer
                    .as_ref()
                    .unwrap()
                    .median_s
                    .unwrap()
                    > 0.0
            );
        }
        let b = stallscope_bundle::Bundle {
            schema_version: stallscope_bundle::SchemaVersion::CURRENT,
            id: "t".into(),
            title: "t".into(),
            created_at: "2026-11-30T00:00:00Z".into(),
            provenance: stallscope_bundle::Provenance::Measured,
            environment: stallscope_bundle::Environment {
                runner: Some(Default::default()),
                host: Some(Default::default()),
                device: Some(ctx.device_info()),
                ..Default::default()
            },
            experiments: vec![e],
            status: stallscope_bundle::RunStatus {
                state: stallscope_bundle::RunState::Complete,
                message: None,
            },
            ranks: vec![],
            notes: vec![],
        };
        assert_eq!(stallscope_bundle::validate(&b), vec![]);
    }
}
