//! What every libtorch experiment kind shares: the run's context for a
//! unit ([`RunCtx`]), the grid experiment's face ([`GridExperiment`]), the
//! training unit through the one loop ([`train_unit`]) and the batch-size
//! configurations. A leaf under `experiments`: the kinds use it, and the
//! parent only dispatches to them.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use stallscope_bundle::{Configuration, Experiment, ParamValue, Run, Seeds, TimingMode};

use crate::device::DeviceCtx;
use crate::feed::Feed;
use crate::models::{ModelSpec, Trainer};
use crate::steps::{CopyMode, TorchSteps, warm_up};
use stallscope_core::{EpochSlot, Progress, UnitError, run_epoch};

/// What every libtorch experiment needs from the run.
pub struct RunCtx<'a> {
    pub device: &'a DeviceCtx,
    pub stop: &'a AtomicBool,
    pub data_dir: Option<&'a Path>,
    pub seeds: Seeds,
    pub progress: &'a dyn Progress,
}

/// A libtorch error as a unit's failure (`?` cannot convert between two
/// foreign types).
pub fn failed(e: tch::TchError) -> UnitError {
    UnitError::Failed(e.to_string())
}

/// A libtorch experiment with a fixed grid of configurations.
pub trait GridExperiment {
    /// The bundle experiment with its configurations and no runs yet.
    fn skeleton(&self) -> Experiment;
    /// Timed epochs per (configuration, repeat), for the progress bar.
    fn epochs_per_unit(&self) -> u64;
    /// Run configuration `index` once (repeat `repeat`), returning its runs.
    fn run_unit(&mut self, index: usize, repeat: u32, rc: &RunCtx) -> Result<Vec<Run>, UnitError>;
    /// After every unit: what the units taught (`Driven::arrange`).
    fn arrange(&self, _experiment: &mut Experiment) {}
}

/// One unit of a training experiment: a configuration, once.
pub struct TrainUnit<'a> {
    pub exp_id: &'a str,
    pub config_id: &'a str,
    pub repeat: u32,
    pub epochs: u32,
    /// The model trained; `None` for `model = "none"`: the loop takes each
    /// batch from the feed and does nothing else (seeds/002's first check).
    pub model: Option<ModelSpec>,
    pub batch_size: i64,
    pub copy: CopyMode,
}

/// The shared unit of the training experiments: for each timing mode a fresh
/// model (same initial weights) and feed, one warm-up step, then `epochs`
/// timed epochs (the first cold, the rest steady) through the one loop.
pub fn train_unit(
    rc: &RunCtx,
    unit: &TrainUnit,
    make_feed: &mut dyn FnMut() -> Result<Box<dyn Feed>, UnitError>,
) -> Result<Vec<Run>, UnitError> {
    let mut runs = Vec::new();
    for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
        let mut trainer = match unit.model {
            Some(m) => Some(
                Trainer::new(m, m.default_optimizer(), rc.device.device, rc.seeds.weights)
                    .map_err(failed)?,
            ),
            None => None,
        };
        let mut feed = make_feed()?;
        if let Some(t) = trainer.as_mut() {
            warm_up(t, rc.device, unit.batch_size)?;
        }
        let mut steps = TorchSteps {
            trainer: trainer.as_mut(),
            feed: feed.as_mut(),
            ctx: rc.device,
            copy: unit.copy,
        };
        for epoch in 0..unit.epochs {
            rc.progress.epoch(
                unit.exp_id,
                unit.config_id,
                unit.repeat,
                mode.clone(),
                epoch,
            );
            let slot = EpochSlot {
                mode: mode.clone(),
                repeat: unit.repeat,
                epoch,
            };
            runs.push(run_epoch(&mut steps, &slot, rc.stop)?);
            rc.progress.epoch_done();
        }
        drop(feed);
        if trainer.take().is_some() {
            rc.device.empty_cache();
        }
    }
    Ok(runs)
}

/// One configuration per batch size (id `bs{b}`, param `batch_size`), each
/// batch `bytes_per_sample × b` bytes; runs are filled in as units finish.
pub fn batch_size_configurations(batch_sizes: &[i64], bytes_per_sample: u64) -> Vec<Configuration> {
    batch_sizes
        .iter()
        .map(|&b| {
            Configuration::new(format!("bs{b}"), batch_label(b))
                .with_param("batch_size", ParamValue::Int(b))
                .with_batch_bytes(bytes_per_sample * b as u64)
        })
        .collect()
}

/// "batch 8,192".
pub fn batch_label(b: i64) -> String {
    let s = b.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("batch {out}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_labels_group_thousands() {
        assert_eq!(batch_label(8192), "batch 8,192");
        assert_eq!(batch_label(32), "batch 32");
        assert_eq!(batch_label(131072), "batch 131,072");
    }
}
