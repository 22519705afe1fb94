//! `compute`: the model's train step on batches already on the device (the
//! ceiling of the differential method) — no loader, no copy in the loop.

use stallscope_bundle::{Experiment, ExperimentKind, LoaderStats, ParamValue, Run};
use tch::Tensor;

use super::common::{GridExperiment, RunCtx, TrainUnit, batch_size_configurations, train_unit};
use crate::feed::{EpochIter, Feed, FeedError, HostBatch, tensor_bytes};
use crate::steps::CopyMode;
use stallscope_core::{
    ModelSpec, UnitError,
    suite::{ExperimentPlan, ExperimentSpec},
};

pub struct Compute {
    id: String,
    title: Option<String>,
    epochs: u32,
    model: ModelSpec,
    batch_sizes: Vec<i64>,
    steps: u32,
}

impl Compute {
    pub fn new(plan: &ExperimentPlan, _rc: &RunCtx) -> Compute {
        let ExperimentSpec::Compute {
            model,
            batch_sizes,
            steps,
        } = &plan.spec
        else {
            unreachable!("Compute::new is called for compute plans only")
        };
        Compute {
            id: plan.id.clone(),
            title: plan.title.clone(),
            epochs: plan.epochs,
            model: *model,
            batch_sizes: batch_sizes.clone(),
            steps: *steps,
        }
    }
}

/// A feed whose batches already live on the device: the loop's transfer
/// stage is then a no-op (the tensors are returned as they are).
pub struct ResidentFeed {
    batches: Vec<(Tensor, Tensor)>,
}

impl ResidentFeed {
    /// `steps` distinct synthetic batches generated on the device from `seed`.
    pub fn new(
        model: ModelSpec,
        batch: i64,
        steps: u32,
        device: tch::Device,
        seed: u64,
    ) -> ResidentFeed {
        ResidentFeed {
            batches: crate::models::seeded(seed, || {
                (0..steps)
                    .map(|_| crate::models::draw_batch(model, batch, device))
                    .collect()
            }),
        }
    }
}

impl Feed for ResidentFeed {
    fn name(&self) -> &str {
        "device_resident"
    }
    fn samples_per_epoch(&self) -> u64 {
        self.batches.iter().map(|b| b.1.size()[0] as u64).sum()
    }
    fn batches_per_epoch(&self) -> u64 {
        self.batches.len() as u64
    }
    fn batch_bytes(&self) -> u64 {
        self.batches
            .first()
            .map_or(0, |(x, y)| tensor_bytes(x) + tensor_bytes(y))
    }
    fn start_epoch(&mut self, _epoch: u32) -> Result<Box<dyn EpochIter + '_>, FeedError> {
        Ok(Box::new(ResidentIter {
            batches: self.batches.iter(),
        }))
    }
    fn loader_stats(&mut self) -> Option<LoaderStats> {
        None
    }
}

struct ResidentIter<'a> {
    batches: std::slice::Iter<'a, (Tensor, Tensor)>,
}

impl EpochIter for ResidentIter<'_> {
    fn next_batch(&mut self) -> Option<Result<HostBatch, FeedError>> {
        let (x, y) = self.batches.next()?;
        let n = y.size()[0] as u64;
        Some(Ok(HostBatch {
            inputs: x.shallow_clone(),
            labels: y.shallow_clone(),
            sample_ids: (0..n).collect(),
        }))
    }
}

impl GridExperiment for Compute {
    fn skeleton(&self) -> Experiment {
        let opt = self.model.default_optimizer();
        Experiment {
            description: Some(format!(
                "{} distinct synthetic batches are generated on the device before the epoch; each epoch trains the {} on them once (zero_grad, forward, cross-entropy, backward, {} step). No loader and no copy: the diagnostic transfer stage only measures the loop's no-op hand-over.",
                self.steps,
                self.model.name(),
                opt.name()
            )),
            swept: vec!["batch_size".into()],
            settings: [
                ("model".to_string(), ParamValue::from(self.model.name())),
                (
                    "parameters".to_string(),
                    ParamValue::from(self.model.parameters() as i64),
                ),
                (
                    "data".to_string(),
                    "synthetic, resident on the device".into(),
                ),
                ("steps_per_epoch".to_string(), self.steps.into()),
                ("optimizer".to_string(), opt.name().into()),
                ("lr".to_string(), opt.lr().into()),
            ]
            .into(),
            baseline: self.batch_sizes.first().map(|b| format!("bs{b}")),
            not_applicable: None,
            configurations: batch_size_configurations(
                &self.batch_sizes,
                (self.model.input_shape().iter().product::<i64>() * 4 + 8) as u64,
            ),
            ..Experiment::new(
                self.id.clone(),
                ExperimentKind::Compute,
                self.title
                    .clone()
                    .unwrap_or_else(|| "Train step on data already on the device".into()),
            )
        }
    }

    fn epochs_per_unit(&self) -> u64 {
        2 * u64::from(self.epochs)
    }

    fn run_unit(&mut self, index: usize, repeat: u32, rc: &RunCtx) -> Result<Vec<Run>, UnitError> {
        let b = self.batch_sizes[index];
        let (model, steps, device, seed) =
            (self.model, self.steps, rc.device.device, rc.seeds.data);
        let mut make_feed = || -> Result<Box<dyn Feed>, UnitError> {
            Ok(Box::new(ResidentFeed::new(model, b, steps, device, seed)))
        };
        let unit = TrainUnit {
            exp_id: &self.id,
            config_id: &format!("bs{b}"),
            repeat,
            epochs: self.epochs,
            model: Some(self.model),
            batch_size: b,
            copy: CopyMode::default(),
        };
        train_unit(rc, &unit, &mut make_feed)
    }
}
