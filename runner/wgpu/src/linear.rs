//! The seeds/000 linear classifier (Linear features→classes, softmax
//! cross-entropy, SGD 0.01) trained on a wgpu device as two WGSL passes, one
//! epoch per bundle run, through the one loop (`stallscope_core::run_epoch`):
//! the host-side gather of each batch is its next-wait, `Queue::write_buffer`
//! its copy, the two compute passes its compute.

use stallscope_bundle::{Configuration, Experiment, ExperimentKind, ParamValue, Run, TimingMode};

use super::steps::{Batches, WgpuSteps, gather};
use super::trainer::{LinearTrainer, initial_weights};
use super::{WgpuCtx, WgpuError};
use stallscope_core::{Driven, EpochSlot, LoopError, UnitCtx, UnitError, run_epoch};
use stallscope_loader::{Sampler as Order, epoch_batches as epoch_indices};

/// What to run.
#[derive(Debug, Clone)]
pub struct LinearPlan {
    pub samples: u32,
    pub features: u32,
    pub classes: u32,
    pub batch_sizes: Vec<u32>,
    /// Epochs per repeat: the first is cold, later ones steady.
    pub epochs: u32,
    pub lr: f32,
    /// Seed of the initial weights (the same for every configuration).
    pub weight_seed: u64,
    /// Seed of the generated data and of the shuffle.
    pub data_seed: u64,
    pub shuffle_seed: u64,
    /// Keep per-step timings of diagnostic runs.
    pub record_steps: bool,
}

/// The seeds/000 data: `samples × features` float32 from N(0, 1) and labels
/// in `0..classes`, the same bytes the libtorch back end and the native loader
/// draw for the same seed (one generator, in the loader crate).
pub fn generate_data(samples: u32, features: u32, classes: u32, seed: u64) -> (Vec<f32>, Vec<u32>) {
    let (x, y) =
        stallscope_loader::tensor_data(samples as usize, features as usize, classes as usize, seed);
    (x, y.into_iter().map(|l| l as u32).collect())
}

/// The linear classifier over batch sizes on wgpu (a `compute` or
/// `batch_sweep` experiment): every configuration in both modes, cold and
/// steady epochs, run unit by unit by the driver.
pub struct WgpuLinear<'a> {
    ctx: &'a WgpuCtx,
    plan: LinearPlan,
    trainer: LinearTrainer<'a>,
    x: Vec<f32>,
    y: Vec<u32>,
    weights: Vec<f32>,
    experiment: Experiment,
}

impl<'a> WgpuLinear<'a> {
    pub fn new(
        ctx: &'a WgpuCtx,
        id: &str,
        kind: ExperimentKind,
        title: &str,
        plan: LinearPlan,
    ) -> Result<Self, WgpuError> {
        let (x, y) = generate_data(plan.samples, plan.features, plan.classes, plan.data_seed);
        let weights = initial_weights(plan.features, plan.classes, plan.weight_seed);
        let max_batch = plan
            .batch_sizes
            .iter()
            .copied()
            .max()
            .unwrap_or(1)
            .min(plan.samples.max(1));
        let trainer = LinearTrainer::new(ctx, plan.features, plan.classes, max_batch, plan.lr)?;
        let experiment = Experiment {
            description: Some(format!(
                "The seeds/000 linear classifier ({}→{}, softmax cross-entropy, SGD {}) trained as WGSL compute passes on {} ({:?}); batches gathered on the host and written to the device each step (workers = 0).",
                plan.features, plan.classes, plan.lr, ctx.info.name, ctx.info.backend
            )),
            swept: vec!["batch_size".into()],
            settings: [
                ("model", ParamValue::from("linear")),
                (
                    "parameters",
                    ParamValue::from(plan.features * plan.classes + plan.classes),
                ),
                ("backend", ParamValue::from("wgpu")),
                (
                    "data",
                    ParamValue::from(format!(
                        "generated {}×{} float32 from N(0, 1) (seed {}), the same bytes as on libtorch",
                        plan.samples, plan.features, plan.data_seed
                    )),
                ),
                ("classes", ParamValue::from(plan.classes)),
                ("optimizer", ParamValue::from("sgd")),
                ("lr", ParamValue::from(f64::from(plan.lr))),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            baseline: plan.batch_sizes.first().map(|b| format!("bs{b}")),
            not_applicable: None,
            configurations: plan
                .batch_sizes
                .iter()
                .map(|b| {
                    Configuration::new(format!("bs{b}"), format!("batch {b}"))
                        .with_param("batch_size", ParamValue::from(*b))
                        .with_batch_bytes(u64::from(*b) * (u64::from(plan.features) * 4 + 4))
                })
                .collect(),
            ..Experiment::new(id.to_string(), kind, title.to_string())
        };
        Ok(WgpuLinear {
            ctx,
            plan,
            trainer,
            x,
            y,
            weights,
            experiment,
        })
    }

    fn unit(&self, batch: u32, repeat: u32, cx: &UnitCtx) -> Result<Vec<Run>, UnitError> {
        let (plan, trainer) = (&self.plan, &self.trainer);
        let features = plan.features as usize;
        let mut runs = Vec::new();
        for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
            trainer.set_weights(&self.weights);
            // Warm-up step of the same shape, outside the timed region.
            let warm: Vec<u64> = (0..u64::from(batch.min(plan.samples))).collect();
            let (mut xb, mut yb) = (Vec::new(), Vec::new());
            gather(&self.x, &self.y, features, &warm, &mut xb, &mut yb);
            trainer.write_batch(&xb, &yb);
            trainer.submit_step(yb.len() as u32);
            trainer.set_weights(&self.weights);
            self.ctx.wait().map_err(LoopError::from)?;
            for e in 0..plan.epochs {
                let cid = format!("bs{batch}");
                cx.progress
                    .epoch(&self.experiment.id, &cid, repeat, mode.clone(), e);
                let order = Order::Shuffled {
                    seed: plan.shuffle_seed,
                };
                // The order is drawn before the clock, as a sampler's is.
                let batches = epoch_indices(order, plan.samples as usize, batch as usize, false, e);
                let mut steps = WgpuSteps {
                    trainer,
                    batches: Batches::Gather {
                        x: &self.x,
                        y: &self.y,
                        features,
                        batches: &batches,
                    },
                };
                let slot = EpochSlot {
                    mode: mode.clone(),
                    repeat,
                    epoch: e,
                };
                let mut run = run_epoch(&mut steps, &slot, cx.stop)?;
                if !plan.record_steps {
                    run.steps = None;
                }
                runs.push(run);
                cx.progress.epoch_done();
            }
        }
        Ok(runs)
    }
}

impl Driven for WgpuLinear<'_> {
    fn skeleton(&self) -> Experiment {
        self.experiment.clone()
    }

    fn epochs_per_unit(&self) -> u64 {
        2 * u64::from(self.plan.epochs)
    }

    fn run_unit(&mut self, index: usize, repeat: u32, cx: &UnitCtx) -> Result<Vec<Run>, UnitError> {
        self.unit(self.plan.batch_sizes[index], repeat, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same SGD step in f64 on the CPU.
    fn reference_step(
        x: &[f32],
        y: &[u32],
        w: &[f32],
        features: usize,
        classes: usize,
        lr: f64,
    ) -> Vec<f64> {
        let batch = y.len();
        let mut g = vec![0f64; w.len()];
        for r in 0..batch {
            let logits: Vec<f64> = (0..classes)
                .map(|k| {
                    f64::from(w[features * classes + k])
                        + (0..features)
                            .map(|d| f64::from(x[r * features + d]) * f64::from(w[d * classes + k]))
                            .sum::<f64>()
                })
                .collect();
            let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
            let s: f64 = e.iter().sum();
            for k in 0..classes {
                let dl = (e[k] / s - if k as u32 == y[r] { 1.0 } else { 0.0 }) / batch as f64;
                for d in 0..features {
                    g[d * classes + k] += f64::from(x[r * features + d]) * dl;
                }
                g[features * classes + k] += dl;
            }
        }
        w.iter()
            .zip(g)
            .map(|(w, g)| f64::from(*w) - lr * g)
            .collect()
    }

    #[test]
    fn one_wgpu_step_equals_the_cpu_reference() {
        let ctx = WgpuCtx::new().expect("a wgpu adapter (software Vulkan: mesa-vulkan-drivers)");
        let (features, classes, batch) = (64u32, 4u32, 37u32);
        let (x, y) = generate_data(batch, features, classes, 3);
        let w0 = initial_weights(features, classes, 5);
        let t = LinearTrainer::new(&ctx, features, classes, batch, 0.5).unwrap();
        t.set_weights(&w0);
        t.write_batch(&x, &y);
        t.submit_step(batch);
        let got = t.read_weights().unwrap();
        let want = reference_step(&x, &y, &w0, features as usize, classes as usize, 0.5);
        assert_eq!(got.len(), want.len());
        let moved = got.iter().zip(&w0).filter(|(a, b)| a != b).count();
        assert!(
            moved > want.len() / 2,
            "the step changed only {moved} weights"
        );
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (f64::from(*g) - w).abs() < 1e-5,
                "weight {i}: wgpu {g} vs reference {w}"
            );
        }
    }

    #[test]
    fn both_modes_are_recorded_for_every_configuration() {
        let ctx = WgpuCtx::new().expect("a wgpu adapter");
        let plan = LinearPlan {
            samples: 512,
            features: 64,
            classes: 4,
            batch_sizes: vec![64, 128],
            epochs: 2,
            lr: 0.01,
            weight_seed: 1,
            data_seed: 2,
            shuffle_seed: 42,
            record_steps: true,
        };
        let mut linear = WgpuLinear::new(
            &ctx,
            "compute_wgpu",
            ExperimentKind::Compute,
            "linear",
            plan,
        )
        .unwrap();
        let (e, outcome) = stallscope_core::drive_alone(&mut linear, 2);
        assert_eq!(outcome, stallscope_core::Outcome::Finished { failures: 0 });
        assert_eq!(e.configurations.len(), 2);
        for c in &e.configurations {
            assert!(c.failure.is_none(), "{:?}", c.failure);
            assert_eq!(c.runs.len(), 2 * 2 * 2, "repeats × modes × epochs");
            for r in &c.runs {
                match &r.timing_mode {
                    TimingMode::WholeRun => {
                        let w = r.whole_run.as_ref().unwrap();
                        let batch = c.params["batch_size"].as_f64().unwrap() as u64;
                        assert_eq!(w.samples, Some(512));
                        assert_eq!(w.steps, Some(512 / batch));
                        assert!(w.seconds.unwrap() > 0.0);
                    }
                    TimingMode::Diagnostic => {
                        let d = r.diagnostic.as_ref().unwrap();
                        let parts = d.next_wait.as_ref().unwrap().mean_s.unwrap()
                            + d.transfer.as_ref().unwrap().mean_s.unwrap()
                            + d.compute.as_ref().unwrap().mean_s.unwrap();
                        let step = d.step.as_ref().unwrap().mean_s.unwrap();
                        assert!(
                            (parts - step).abs() <= 0.05 * step,
                            "stages {parts} vs step {step}"
                        );
                        assert_eq!(
                            r.steps.as_ref().unwrap().compute_ns.len(),
                            512 / c.params["batch_size"].as_f64().unwrap() as usize
                        );
                    }
                    TimingMode::Unknown(m) => panic!("unexpected timing mode {m}"),
                }
            }
        }
    }
}
