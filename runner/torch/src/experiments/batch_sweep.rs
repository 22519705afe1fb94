//! `batch_sweep`: the seeds/003 protocol — the same model trained for whole
//! epochs at each batch size with the in-loop loader (pinned on CUDA), in both
//! timing modes, cold and steady epochs, with peak memory per epoch.

use std::sync::Arc;

use stallscope_bundle::{Experiment, ExperimentKind, ParamValue, Run};

use super::common::{GridExperiment, RunCtx, TrainUnit, batch_size_configurations, train_unit};
use crate::data::{FashionMnist, tensor_data};
use crate::feed::{Dataset, Feed, InLoopConfig, InLoopLoader, Order};
use crate::steps::CopyMode;
use stallscope_core::{
    ModelSpec, UnitError,
    suite::{DataSpec, ExperimentPlan, ExperimentSpec},
};

pub struct BatchSweep {
    id: String,
    title: Option<String>,
    epochs: u32,
    repeats: u32,
    model: ModelSpec,
    batch_sizes: Vec<i64>,
    dataset: Arc<dyn Dataset>,
    data_source: String,
    samples: usize,
    pinned: bool,
    shuffle_seed: u64,
}

impl BatchSweep {
    pub fn new(plan: &ExperimentPlan, rc: &RunCtx) -> Result<BatchSweep, UnitError> {
        let ExperimentSpec::BatchSweep {
            model,
            data,
            batch_sizes,
        } = &plan.spec
        else {
            unreachable!("BatchSweep::new is called for batch_sweep plans only")
        };
        let (dataset, data_source, samples): (Arc<dyn Dataset>, String, usize) = match *data {
            DataSpec::FashionMnist { samples } => {
                let d = match rc.data_dir {
                    Some(dir) => {
                        FashionMnist::from_dir(dir).map_err(|e| UnitError::Failed(e.to_string()))?
                    }
                    None => FashionMnist::synthetic(60_000, rc.seeds.data),
                }
                .truncate(samples);
                let source = d.source.clone();
                let n = d.len();
                (Arc::new(d), source, n)
            }
            DataSpec::Tensor {
                samples,
                features,
                classes,
            } => (
                Arc::new(tensor_data(
                    samples,
                    features,
                    classes as u64,
                    rc.seeds.data,
                )),
                "generated-tensors".into(),
                samples,
            ),
        };
        Ok(BatchSweep {
            id: plan.id.clone(),
            title: plan.title.clone(),
            epochs: plan.epochs,
            repeats: plan.repeats,
            model: *model,
            batch_sizes: batch_sizes.clone(),
            dataset,
            data_source,
            samples,
            pinned: rc.device.is_cuda(),
            shuffle_seed: rc.seeds.shuffle,
        })
    }
}

impl GridExperiment for BatchSweep {
    fn skeleton(&self) -> Experiment {
        let mut settings = std::collections::BTreeMap::new();
        let data = if self.data_source.starts_with("idx:")
            || self.data_source.starts_with("synthetic-fashion")
        {
            "fashionmnist"
        } else {
            "tensor"
        };
        for (k, v) in [
            ("model", ParamValue::from(self.model.name())),
            (
                "parameters",
                ParamValue::from(self.model.parameters() as i64),
            ),
            ("data", data.into()),
            ("data_source", self.data_source.clone().into()),
            ("samples", self.samples.into()),
            ("workers", 0i64.into()),
            ("pinned", self.pinned.into()),
            ("non_blocking", self.pinned.into()),
            ("optimizer", self.model.default_optimizer().name().into()),
            ("lr", self.model.default_optimizer().lr().into()),
            ("shuffle_seed", (self.shuffle_seed as i64).into()),
            ("drop_last", false.into()),
            ("epochs_per_repeat", self.epochs.into()),
            ("repeats", self.repeats.into()),
            ("repeat_order", "ascending, descending, ascending, …".into()),
            (
                "warm_up",
                "1 synthetic step of the same batch shape, untimed".into(),
            ),
        ] {
            settings.insert(k.to_string(), v);
        }
        Experiment {
            description: Some(format!(
                "Each batch size trains the {} for whole epochs over {} samples ({}) with the in-loop loader (workers 0{}), in both timing modes; epoch 0 of each repeat is cold, later epochs steady. Peak host RSS is reset before every epoch where the kernel allows it.",
                self.model.name(),
                self.samples,
                self.data_source,
                if self.pinned {
                    ", pinned memory, non-blocking copies"
                } else {
                    "; on the CPU there is no pinning and no copy"
                },
            )),
            swept: vec!["batch_size".into()],
            settings,
            baseline: self.batch_sizes.first().map(|b| format!("bs{b}")),
            not_applicable: None,
            configurations: batch_size_configurations(
                &self.batch_sizes,
                (self.dataset.sample_shape().iter().product::<i64>() * 4 + 8) as u64,
            ),
            ..Experiment::new(
                self.id.clone(),
                ExperimentKind::BatchSweep,
                self.title
                    .clone()
                    .unwrap_or_else(|| "Throughput and memory across batch sizes".into()),
            )
        }
    }

    fn epochs_per_unit(&self) -> u64 {
        2 * u64::from(self.epochs)
    }

    fn run_unit(&mut self, index: usize, repeat: u32, rc: &RunCtx) -> Result<Vec<Run>, UnitError> {
        let batch_size = self.batch_sizes[index];
        let config = InLoopConfig {
            batch_size: batch_size as usize,
            order: Order::Shuffled {
                seed: self.shuffle_seed,
            },
            drop_last: false,
            pin_for: self.pinned.then_some(rc.device.device),
        };
        let dataset = self.dataset.clone();
        let mut make_feed = || -> Result<Box<dyn Feed>, UnitError> {
            let feed = InLoopLoader::new(dataset.clone(), config)
                .map_err(|e| UnitError::Failed(e.to_string()))?;
            Ok(Box::new(feed))
        };
        let unit = TrainUnit {
            exp_id: &self.id,
            config_id: &format!("bs{batch_size}"),
            repeat,
            epochs: self.epochs,
            model: Some(self.model),
            batch_size,
            copy: CopyMode {
                non_blocking: self.pinned,
                prefetch_to_device: false,
            },
        };
        train_unit(rc, &unit, &mut make_feed)
    }
}
