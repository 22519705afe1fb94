//! `kind = "stall"`: the differential method on one loader configuration.
//! The same model trains three ways — batches already on the device
//! (compute_only), pre-collated batches in host memory copied each step
//! (from_host; pinned on CUDA), and the real loader (full_pipeline) — and
//! `stallscope_bundle::analysis::stall_attribution` compares their whole-run
//! rates.

use std::sync::{Arc, Mutex};

use stallscope_bundle::{Configuration, Experiment, ExperimentKind, LoaderStats, Run};

use super::common::{GridExperiment, RunCtx, failed};
use super::loader_common::{Common, native_feed, recorded};
use super::native_feed::{NativeFeed, Pinning};
use crate::feed::{EpochIter, Feed, FeedError, HostBatch};
use stallscope_core::{
    UnitError,
    grid::Point,
    suite::{ExperimentPlan, ExperimentSpec},
};

const WAYS: [(&str, &str); 3] = [
    (
        "compute_only",
        "compute only: batches already on the device (the ceiling)",
    ),
    (
        "from_host",
        "from host memory: pre-collated batches copied each step",
    ),
    ("full_pipeline", "full pipeline: the real loader"),
];

pub struct StallExperiment {
    common: Common,
    point: Point,
}

impl StallExperiment {
    pub fn new(plan: &ExperimentPlan, rc: &RunCtx) -> Result<StallExperiment, UnitError> {
        let ExperimentSpec::Stall(lp) = &plan.spec else {
            unreachable!("StallExperiment::new is called for stall plans only")
        };
        let point = Point {
            kind: lp.kinds[0],
            prefetch: lp.prefetch[0],
            persistent: lp.persistent[0],
            ..Point::base(
                stallscope_core::suite::EngineName::Native,
                lp.workers[0],
                lp.pinned[0] || rc.device.is_cuda(),
                false,
            )
        };
        Ok(StallExperiment {
            common: Common::new(plan, lp, rc)?,
            point,
        })
    }

    /// Every batch of epoch 0 from the real loader, collated (and pinned on
    /// CUDA) before the timed region.
    fn host_batches(&self) -> Result<Vec<HostBatch>, UnitError> {
        let pinning = Pinning::for_device(self.point.pinned, self.common.device);
        let mut feed = NativeFeed::new(
            self.common.loader_config(self.point, "from_host"),
            self.common.native_spec()?.clone(),
            pinning,
        )
        .map_err(|e| UnitError::Failed(e.to_string()))?;
        let mut it = feed
            .start_epoch(0)
            .map_err(|e| UnitError::Failed(e.to_string()))?;
        let mut out = Vec::new();
        while let Some(b) = it.next_batch() {
            out.push(b.map_err(|e| UnitError::Failed(e.to_string()))?);
        }
        Ok(out)
    }
}

/// Pre-collated batches (in host memory, or already on the device) handed
/// out again every epoch.
struct ResidentBatches {
    name: &'static str,
    batches: Vec<HostBatch>,
    batch_bytes: u64,
}

fn shallow(b: &HostBatch) -> HostBatch {
    HostBatch {
        inputs: b.inputs.shallow_clone(),
        labels: b.labels.shallow_clone(),
        sample_ids: b.sample_ids.clone(),
    }
}

impl Feed for ResidentBatches {
    fn name(&self) -> &str {
        self.name
    }
    fn samples_per_epoch(&self) -> u64 {
        self.batches.iter().map(|b| b.len() as u64).sum()
    }
    fn batches_per_epoch(&self) -> u64 {
        self.batches.len() as u64
    }
    fn batch_bytes(&self) -> u64 {
        self.batch_bytes
    }
    fn start_epoch(&mut self, _epoch: u32) -> Result<Box<dyn EpochIter + '_>, FeedError> {
        Ok(Box::new(HostIter {
            batches: self.batches.iter(),
        }))
    }
    fn loader_stats(&mut self) -> Option<LoaderStats> {
        None
    }
}

struct HostIter<'a> {
    batches: std::slice::Iter<'a, HostBatch>,
}

impl EpochIter for HostIter<'_> {
    fn next_batch(&mut self) -> Option<Result<HostBatch, FeedError>> {
        Some(Ok(shallow(self.batches.next()?)))
    }
}

impl GridExperiment for StallExperiment {
    fn skeleton(&self) -> Experiment {
        let p = self.point;
        let mut settings = self.common.settings();
        settings.insert("workers".into(), p.workers.into());
        settings.insert(
            "worker_kind".into(),
            (if p.workers == 0 {
                "in_loop"
            } else {
                p.kind.as_str()
            })
            .into(),
        );
        if p.workers > 0 {
            settings.insert("prefetch".into(), p.prefetch.into());
            settings.insert("persistent".into(), p.persistent.into());
        }
        settings.insert("pinned".into(), p.pinned.into());
        Experiment {
            description: Some(format!(
                "The {} trains three ways on the same batches (the loader's epoch 0, collated before the timed region for the first two): already on the device (compute_only), on pre-collated batches from host memory{} copied each step (from_host), and through the loader ({}). Transfer stall = 1 − from_host/compute_only; data stall = 1 − full_pipeline/from_host, from whole-run rates (the Data Stalls paper's method).{}",
                self.common.plan.model.name(),
                if self.common.cuda { " (pinned)" } else { "" },
                self.common.data_source,
                if self.common.cuda {
                    ""
                } else {
                    " On the CPU there is no copy to a device, so from_host measures only the hand-over of a ready batch."
                },
            )),
            swept: vec!["source".into()],
            settings,
            baseline: Some("compute_only".into()),
            not_applicable: None,
            configurations: WAYS
                .iter()
                .map(|(id, label)| {
                    Configuration::new(*id, *label)
                        .with_param("source", *id)
                        .with_batch_bytes(self.common.stall_batch_bytes())
                })
                .collect(),
            ..Experiment::new(
                self.common.id.clone(),
                ExperimentKind::Stall,
                self.common.title.clone().unwrap_or_else(|| {
                    "Where the step waits: differential stall attribution".into()
                }),
            )
        }
    }

    fn epochs_per_unit(&self) -> u64 {
        2 * u64::from(self.common.epochs)
    }

    fn run_unit(&mut self, index: usize, repeat: u32, rc: &RunCtx) -> Result<Vec<Run>, UnitError> {
        let (id, _) = WAYS[index];
        let last_error = Arc::new(Mutex::new(None));
        match id {
            "compute_only" => {
                // The same batches as from_host, moved to the device once
                // before the timed region: only the per-step copy differs.
                let device = rc.device.device;
                let on_device = self
                    .host_batches()?
                    .into_iter()
                    .map(|b| {
                        Ok(HostBatch {
                            inputs: b.inputs.f_to_device(device)?,
                            labels: b.labels.f_to_device(device)?,
                            sample_ids: b.sample_ids,
                        })
                    })
                    .collect::<Result<Vec<_>, tch::TchError>>()
                    .map_err(failed)?;
                let batch_bytes = self.common.stall_batch_bytes();
                let mut make_feed = || -> Result<Box<dyn Feed>, UnitError> {
                    Ok(Box::new(ResidentBatches {
                        name: "device_resident",
                        batches: on_device.iter().map(shallow).collect(),
                        batch_bytes,
                    }))
                };
                self.common.train(rc, id, repeat, &mut make_feed, false)
            }
            "from_host" => {
                let batches = self.host_batches()?;
                let batch_bytes = self.common.stall_batch_bytes();
                let mut make_feed = || -> Result<Box<dyn Feed>, UnitError> {
                    Ok(Box::new(ResidentBatches {
                        name: "host_resident",
                        batches: batches.iter().map(shallow).collect(),
                        batch_bytes,
                    }))
                };
                self.common
                    .train(rc, id, repeat, &mut make_feed, self.point.pinned)
            }
            _ => {
                let (common, point) = (&self.common, self.point);
                let mut make_feed = || native_feed(common, point, id, &last_error);
                common
                    .train(rc, id, repeat, &mut make_feed, point.pinned)
                    .map_err(|e| recorded(e, &last_error))
            }
        }
    }
}
