//! The models the experiments train: the seeds/003 CNN, the seeds/000 linear
//! classifier and a larger CNN for image inputs, with their optimizers and the
//! one training step every timing mode runs.

use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

pub use stallscope_core::{ModelSpec, OptimizerSpec};

/// A model on a device with its optimizer: what one configuration trains.
pub struct Trainer {
    pub vs: nn::VarStore,
    model: Box<dyn Module>,
    opt: nn::Optimizer,
    pub spec: ModelSpec,
}

impl Trainer {
    /// Build the model with weights drawn from `weights_seed` (the same seed
    /// gives the same initial weights on every configuration).
    pub fn new(
        spec: ModelSpec,
        optimizer: OptimizerSpec,
        device: Device,
        weights_seed: u64,
    ) -> Result<Trainer, tch::TchError> {
        // Weights are drawn on the CPU (so they do not depend on the device's
        // generator) and then moved.
        let (mut vs, model) = seeded(weights_seed, || {
            let vs = nn::VarStore::new(Device::Cpu);
            let model = build(&vs.root(), spec);
            (vs, model)
        });
        vs.set_device(device);
        let opt = match optimizer {
            OptimizerSpec::Adam { lr } => nn::Adam::default().build(&vs, lr)?,
            OptimizerSpec::Sgd { lr } => nn::Sgd::default().build(&vs, lr)?,
        };
        Ok(Trainer {
            vs,
            model,
            opt,
            spec,
        })
    }

    /// Number of trainable parameters.
    pub fn parameter_count(&self) -> i64 {
        self.vs
            .trainable_variables()
            .iter()
            .map(Tensor::numel)
            .sum::<usize>() as i64
    }

    /// One training step on device tensors: `zero_grad` (set to none, as
    /// libtorch's default), forward, cross-entropy, backward, optimizer step.
    /// Reads nothing back from the device.
    pub fn step(&mut self, inputs: &Tensor, labels: &Tensor) -> Result<(), tch::TchError> {
        self.opt.zero_grad();
        let logits = self.model.forward(inputs);
        let loss =
            logits.f_cross_entropy_loss(labels, None::<Tensor>, tch::Reduction::Mean, -100, 0.0)?;
        loss.f_backward()?;
        self.opt.step();
        Ok(())
    }
}

fn build(p: &nn::Path, spec: ModelSpec) -> Box<dyn Module> {
    let pad = nn::ConvConfig {
        padding: 1,
        ..Default::default()
    };
    match spec {
        ModelSpec::FashionCnn => Box::new(
            nn::seq()
                .add(nn::conv2d(p / "conv1", 1, 16, 3, pad))
                .add_fn(|x| x.relu().max_pool2d_default(2))
                .add(nn::conv2d(p / "conv2", 16, 32, 3, pad))
                .add_fn(|x| x.relu().max_pool2d_default(2).flatten(1, -1))
                .add(nn::linear(p / "fc1", 1568, 64, Default::default()))
                .add_fn(|x| x.relu())
                .add(nn::linear(p / "fc2", 64, 10, Default::default())),
        ),
        ModelSpec::Linear { features, classes } => {
            Box::new(nn::linear(p / "fc", features, classes, Default::default()))
        }
        ModelSpec::ImageCnn { classes, .. } => {
            let s2 = nn::ConvConfig {
                padding: 1,
                stride: 2,
                ..Default::default()
            };
            Box::new(
                nn::seq()
                    .add(nn::conv2d(p / "conv1", 3, 32, 3, s2))
                    .add_fn(|x| x.relu())
                    .add(nn::conv2d(p / "conv2", 32, 64, 3, s2))
                    .add_fn(|x| x.relu())
                    .add(nn::conv2d(p / "conv3", 64, 128, 3, s2))
                    .add_fn(|x| x.relu())
                    .add(nn::conv2d(p / "conv4", 128, 256, 3, s2))
                    .add_fn(|x| x.relu().adaptive_avg_pool2d([1, 1]).flatten(1, -1))
                    .add(nn::linear(p / "fc", 256, classes, Default::default())),
            )
        }
    }
}

/// libtorch's generator is one per process: seeding it and drawing from it
/// hold this lock, so two threads (tests, back ends) never interleave draws and
/// the same seed always gives the same values.
static GLOBAL_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Run `draw` with libtorch's generator seeded with `seed`, alone.
pub fn seeded<T>(seed: u64, draw: impl FnOnce() -> T) -> T {
    let _alone = GLOBAL_RNG.lock().unwrap_or_else(|e| e.into_inner());
    tch::manual_seed(seed as i64);
    draw()
}

/// A synthetic batch of the model's input shape (for warm-up and probes).
pub fn synthetic_batch(spec: ModelSpec, batch: i64, device: Device) -> (Tensor, Tensor) {
    let _alone = GLOBAL_RNG.lock().unwrap_or_else(|e| e.into_inner());
    draw_batch(spec, batch, device)
}

/// [`synthetic_batch`] for a caller already holding the generator.
pub fn draw_batch(spec: ModelSpec, batch: i64, device: Device) -> (Tensor, Tensor) {
    let mut shape = vec![batch];
    shape.extend(spec.input_shape());
    let x = Tensor::randn(&shape, (Kind::Float, device));
    let y = Tensor::randint(spec.classes(), [batch], (Kind::Int64, device));
    (x, y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fashion_cnn_has_the_seeds_parameter_count() {
        let t = Trainer::new(
            ModelSpec::FashionCnn,
            OptimizerSpec::Adam { lr: 1e-3 },
            Device::Cpu,
            0,
        )
        .unwrap();
        assert_eq!(t.parameter_count(), 105_866);
    }

    /// The count a bundle records comes from the plain spec; it must be the
    /// built model's, for every architecture and shape.
    #[test]
    fn the_specs_count_is_the_built_models() {
        let mut specs = vec![ModelSpec::FashionCnn];
        for (a, b) in [(1, 2), (32, 4), (64, 10), (7, 3)] {
            specs.push(ModelSpec::Linear {
                features: a,
                classes: b,
            });
            specs.push(ModelSpec::ImageCnn {
                size: 8 * a,
                classes: b,
            });
        }
        for spec in specs {
            let t = Trainer::new(spec, spec.default_optimizer(), Device::Cpu, 0).unwrap();
            assert_eq!(t.parameter_count() as u64, spec.parameters(), "{spec:?}");
        }
    }

    #[test]
    fn same_seed_gives_same_weights_and_a_step_changes_them() {
        let spec = ModelSpec::Linear {
            features: 64,
            classes: 4,
        };
        let mut a = Trainer::new(spec, spec.default_optimizer(), Device::Cpu, 3).unwrap();
        let b = Trainer::new(spec, spec.default_optimizer(), Device::Cpu, 3).unwrap();
        let before: Vec<Tensor> =
            a.vs.trainable_variables()
                .iter()
                .map(|t| t.copy())
                .collect();
        let same = b.vs.trainable_variables();
        for (x, y) in before.iter().zip(same.iter()) {
            assert!(x.equal(y));
        }
        let (x, y) = synthetic_batch(spec, 8, Device::Cpu);
        a.step(&x, &y).unwrap();
        let after = a.vs.trainable_variables();
        assert!(before.iter().zip(after.iter()).any(|(x, y)| !x.equal(y)));
    }

    #[test]
    fn image_cnn_takes_its_input_size() {
        let spec = ModelSpec::ImageCnn {
            size: 64,
            classes: 10,
        };
        let mut t = Trainer::new(spec, spec.default_optimizer(), Device::Cpu, 1).unwrap();
        let (x, y) = synthetic_batch(spec, 2, Device::Cpu);
        t.step(&x, &y).unwrap();
        assert!(t.parameter_count() > 105_866);
    }
}
