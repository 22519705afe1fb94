//! Host-to-device copies on wgpu (`Queue::write_buffer` into a device
//! buffer), reported as bytes per second per size, in both timing modes:
//! whole-run queues every copy and waits once; diagnostic waits after each.

use std::time::Instant;

use stallscope_bundle::{
    Configuration, Experiment, ExperimentKind, Memory, ParamValue, Phase, Run, StepSeries,
    TimingMode, WholeRun,
};

use super::{WgpuCtx, WgpuError, host_peak_rss_bytes};
use crate::driver::{Driven, UnitCtx, UnitError};
use crate::train::diagnostic_from_series;

/// What to run.
#[derive(Debug, Clone)]
pub struct TransferPlan {
    pub sizes_bytes: Vec<u64>,
    /// Copies per run.
    pub copies: u32,
}

fn one_size(ctx: &WgpuCtx, size: u64, copies: u32, repeat: u32) -> Result<Vec<Run>, WgpuError> {
    if size > ctx.limits.max_buffer_size {
        return Err(WgpuError::Invalid(format!(
            "{size} bytes exceed the device's largest buffer ({} bytes)",
            ctx.limits.max_buffer_size
        )));
    }
    let size = size.div_ceil(4) * 4;
    let host: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("transfer"),
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    // Warm-up copy outside the timed region.
    ctx.queue.write_buffer(&buf, 0, &host);
    ctx.queue.submit(std::iter::empty());
    ctx.wait()?;
    let bytes = size * u64::from(copies);
    let mut runs = Vec::new();
    for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
        let mut run = Run::new(
            format!("{}-r{repeat}", mode.as_str()),
            mode.clone(),
            repeat,
            0,
            Phase::Steady,
        );
        ctx.wait()?;
        let started = Instant::now();
        match &mode {
            TimingMode::WholeRun => {
                for _ in 0..copies {
                    ctx.queue.write_buffer(&buf, 0, &host);
                    ctx.queue.submit(std::iter::empty());
                }
                ctx.wait()?;
                let seconds = started.elapsed().as_secs_f64();
                run.whole_run = Some(WholeRun {
                    seconds: Some(seconds),
                    samples: Some(u64::from(copies)),
                    samples_per_s: Some(f64::from(copies) / seconds),
                    steps: Some(u64::from(copies)),
                    bytes: Some(bytes),
                    ..WholeRun::default()
                });
            }
            TimingMode::Diagnostic => {
                let mut s = StepSeries::default();
                for _ in 0..copies {
                    let t0 = Instant::now();
                    let src = host.as_slice();
                    let t1 = Instant::now();
                    ctx.queue.write_buffer(&buf, 0, src);
                    ctx.queue.submit(std::iter::empty());
                    ctx.wait()?;
                    let t2 = Instant::now();
                    s.next_wait_ns.push((t1 - t0).as_nanos() as u64);
                    s.transfer_ns.push((t2 - t1).as_nanos() as u64);
                    s.compute_ns.push(0);
                }
                let seconds = started.elapsed().as_secs_f64();
                run.diagnostic = Some(diagnostic_from_series(
                    &s,
                    seconds,
                    u64::from(copies),
                    bytes,
                    None,
                ));
            }
            TimingMode::Unknown(_) => {
                unreachable!("the runner times whole_run and diagnostic only")
            }
        }
        run.memory = Some(Memory {
            host_peak_rss_bytes: host_peak_rss_bytes(),
            ..Memory::default()
        });
        runs.push(run);
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
        2
    }

    fn run_unit(&mut self, index: usize, repeat: u32, cx: &UnitCtx) -> Result<Vec<Run>, UnitError> {
        let id = &self.experiment.configurations[index].id;
        cx.progress
            .epoch(&self.experiment.id, id, repeat, TimingMode::WholeRun, 0);
        let runs = one_size(
            self.ctx,
            self.plan.sizes_bytes[index],
            self.plan.copies,
            repeat,
        )
        .map_err(|e| UnitError::Failed(e.to_string()));
        cx.progress.epoch_done();
        cx.progress.epoch_done();
        runs
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
        };
        let mut t = WgpuTransfer::new(&ctx, "transfer_wgpu", "copies", plan);
        let (e, outcome) = crate::driver::drive_alone(&mut t, 1);
        assert_eq!(outcome, crate::driver::Outcome::Finished { failures: 0 });
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
