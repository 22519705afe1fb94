//! What the loader sweep's experiments (`loader`, `stall`) and its peer
//! units share: the data, the model and the loader basics ([`Common`]), the
//! native feed of one point and the fault hook. A leaf under
//! `experiments`, so the kinds and the peer units do not reach into each
//! other.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use stallscope_bundle::{ParamValue, Run};

use super::common::{RunCtx, TrainUnit, train_unit};
use super::native_feed::{NativeFeed, Pinning};
use super::peer_source::PeerSource;
use crate::feed::Feed;
use crate::steps::CopyMode;
use stallscope_core::{
    UnitError,
    grid::{Point, loader_config},
    suite::{DataPlan, ExperimentPlan, LoaderPlan},
};
use stallscope_loader::{
    Fault, LoaderConfig, LoaderError, OnBadSample, SourceSpec, full_batch_bytes,
};

/// Test and demonstration hook: `STALLSCOPE_LOADER_FAULT=panic@N` or
/// `abort@N` makes the worker loading sample N panic or (a process) abort;
/// `…@N@CONFIG` limits it to the configuration with that id.
pub const FAULT_ENV: &str = "STALLSCOPE_LOADER_FAULT";

fn fault_from_env(config_id: &str) -> Option<Fault> {
    let v = std::env::var(FAULT_ENV).ok()?;
    let mut parts = v.split('@');
    let (what, sample) = (parts.next()?, parts.next()?.parse().ok()?);
    if let Some(only) = parts.next()
        && only != config_id
    {
        return None;
    }
    match what {
        "panic" => Some(Fault::PanicAt { sample }),
        "abort" => Some(Fault::AbortAt { sample }),
        _ => None,
    }
}

/// What both experiments share: the data, the model, the loader basics.
pub(super) struct Common {
    pub(super) id: String,
    pub(super) title: Option<String>,
    pub(super) epochs: u32,
    pub(super) plan: LoaderPlan,
    /// The native loader's source; `None` for a user's Python Dataset,
    /// which only the pytorch engine reads.
    pub(super) spec: Option<SourceSpec>,
    pub(super) data_source: String,
    /// Trainable parameters of the model (none with `model = "none"`):
    /// every engine must build the same.
    pub(super) parameters: Option<u64>,
    /// The peers' view of the source, built once (tensor files written,
    /// image folder listed).
    pub(super) peer_source: std::sync::OnceLock<Result<PeerSource, String>>,
    /// The first hello of a peer unit on the user's own model: the model
    /// the harness built (its parameter count, class, loss, optimizer).
    pub(super) first_hello: std::sync::OnceLock<stallscope_peers::Hello>,
    pub(super) samples: usize,
    pub(super) sample_dims: Vec<usize>,
    pub(super) shuffle_seed: u64,
    pub(super) cuda: bool,
    pub(super) device: tch::Device,
    pub(super) pin_note: Option<String>,
    pub(super) weights_seed: u64,
}

impl Common {
    pub(super) fn new(
        plan: &ExperimentPlan,
        lp: &LoaderPlan,
        rc: &RunCtx,
    ) -> Result<Common, UnitError> {
        let fail = |e: &dyn std::fmt::Display| UnitError::Failed(e.to_string());
        let seed = rc.seeds.data;
        let (spec, mut data_source) = super::source_plan::source_spec(lp, seed, rc.data_dir)?;
        let (samples, sample_dims) = match &spec {
            Some(spec) => {
                let probe = stallscope_loader::open_source(spec).map_err(|e| fail(&e))?;
                if let Some(how) = probe.describe() {
                    data_source += &format!("; native loader: {how}");
                }
                (probe.len(), probe.sample_dims())
            }
            None => (0, Vec::new()),
        };
        let parameters = if lp.loader_only || matches!(lp.data, DataPlan::Python { .. }) {
            None
        } else {
            Some(lp.model.parameters())
        };
        let cuda = rc.device.is_cuda();
        let pin_note = match (
            lp.pinned.contains(&true),
            Pinning::for_device(true, rc.device.device),
        ) {
            (true, Pinning::Skipped(reason)) => Some(reason),
            _ => None,
        };
        Ok(Common {
            id: plan.id.clone(),
            title: plan.title.clone(),
            epochs: plan.epochs,
            plan: lp.clone(),
            samples,
            sample_dims,
            spec,
            data_source,
            parameters,
            peer_source: std::sync::OnceLock::new(),
            first_hello: std::sync::OnceLock::new(),
            weights_seed: rc.seeds.weights,
            shuffle_seed: rc.seeds.shuffle,
            cuda,
            device: rc.device.device,
            pin_note,
        })
    }

    pub(super) fn loader_config(&self, p: Point, config_id: &str) -> LoaderConfig {
        LoaderConfig {
            fault: fault_from_env(config_id),
            ..loader_config(&self.plan, p, self.shuffle_seed)
        }
    }

    /// Bytes of one full batch, when the source's shape is known here.
    pub(super) fn batch_bytes(&self) -> Option<u64> {
        self.spec
            .as_ref()
            .map(|_| full_batch_bytes(&self.sample_dims, self.plan.batch_size))
    }

    /// Bytes of one full batch of a stall experiment (whose source is
    /// always the native loader's: the suite refuses a Python one).
    pub(super) fn stall_batch_bytes(&self) -> u64 {
        self.batch_bytes()
            .expect("a stall experiment has a native source (checked by the suite)")
    }

    /// The native loader's source, or why this configuration has none.
    pub(super) fn native_spec(&self) -> Result<&SourceSpec, UnitError> {
        self.spec.as_ref().ok_or_else(|| {
            UnitError::Failed("a Python Dataset is read by the pytorch engine only".into())
        })
    }

    /// The model's name in the bundle: `none`, `python` (the user's) or
    /// the native model's.
    fn model_name(&self) -> &'static str {
        match (self.plan.loader_only, &self.plan.python_model) {
            (true, _) => "none",
            (false, Some(_)) => "python",
            (false, None) => self.plan.model.name(),
        }
    }

    /// The user's model as the harness built it, once a unit has said:
    /// its parameter count, class, loss and optimizer.
    pub(super) fn built_model_settings(&self, settings: &mut BTreeMap<String, ParamValue>) {
        let Some(h) = self.first_hello.get() else {
            return;
        };
        settings.insert("parameters".into(), (h.parameters as i64).into());
        if let Some(m) = &h.model {
            settings.insert("model_class".into(), m.class.clone().into());
            settings.insert("loss".into(), m.loss.clone().into());
            settings.insert("optimizer".into(), m.optimizer.clone().into());
            if let Some(lr) = m.lr {
                settings.insert("lr".into(), lr.into());
            }
        }
    }

    pub(super) fn settings(&self) -> BTreeMap<String, ParamValue> {
        let mut s = BTreeMap::new();
        let mut put = |k: &str, v: ParamValue| {
            s.insert(k.to_string(), v);
        };
        put("model", self.model_name().into());
        if let Some(m) = &self.plan.python_model {
            put("model_factory", m.factory.clone().into());
            put(
                "model_args",
                serde_json::Value::Object(m.args.clone()).to_string().into(),
            );
        }
        if let Some(n) = self.parameters {
            put("parameters", (n as i64).into());
        }
        if self.plan.loader_only {
            put(
                "loader_only",
                "model = none: the loop only takes each batch from the loader (no copy, no step); transfer and compute are 0 in every step".into(),
            );
        }
        put("data", self.plan.data.name().into());
        put("data_source", self.data_source.clone().into());
        if self.spec.is_some() {
            put("samples", self.samples.into());
        }
        put("batch_size", self.plan.batch_size.into());
        if let Some(note) = &self.plan.workers_auto {
            put("workers_auto", note.clone().into());
        }
        put("shuffle", self.plan.shuffle.into());
        put("shuffle_seed", (self.shuffle_seed as i64).into());
        put(
            "augment_seed",
            format!("per worker and epoch, derived from {}", self.shuffle_seed).into(),
        );
        put("drop_last", self.plan.drop_last.into());
        put("in_order", self.plan.in_order.into());
        put(
            "on_bad_sample",
            match self.plan.on_bad_sample {
                OnBadSample::Skip => "skip",
                OnBadSample::Fail => "fail",
            }
            .into(),
        );
        // A user's model's optimizer is known once the harness built it.
        if !self.plan.loader_only && self.plan.python_model.is_none() {
            put(
                "optimizer",
                self.plan.model.default_optimizer().name().into(),
            );
            put("lr", self.plan.model.default_optimizer().lr().into());
        }
        if !self.plan.loader_only {
            put("weights_seed", (self.weights_seed as i64).into());
        }
        put("prefetch_estimate", "batch_bytes × workers × prefetch: an estimate of batch contents only (not the dataset, work in flight, shared memory or pinned staging); compare with the measured host peak RSS".into());
        put(
            "host_peak_rss",
            if stallscope_core::grid::engine_swept(&self.plan) {
                "of the process that ran the loop: the runner (native) or the Python harness (pytorch, spdl); worker processes' own memory is not included"
            } else {
                "of the runner process; worker processes' own memory is not included"
            }
            .into(),
        );
        if self.plan.prefetch_to_device.contains(&true) && !self.cuda {
            put(
                "prefetch_to_device",
                "not applicable on the CPU: there is no copy to a device to overlap with compute; only the configurations without it ran".into(),
            );
        }
        put(
            "warm_up",
            if self.plan.python_model.is_some() {
                "1 step on the Dataset's first batch, untimed (a forward and loss on it first check that the model takes it)"
            } else {
                "1 synthetic step of the same batch shape, untimed"
            }
            .into(),
        );
        if let Some(note) = &self.pin_note {
            put("pinning_skipped", note.clone().into());
        }
        s
    }

    pub(super) fn train(
        &self,
        rc: &RunCtx,
        config_id: &str,
        repeat: u32,
        make_feed: &mut dyn FnMut() -> Result<Box<dyn Feed>, UnitError>,
        non_blocking: bool,
    ) -> Result<Vec<Run>, UnitError> {
        self.train_ahead(rc, config_id, repeat, make_feed, non_blocking, false)
    }

    /// [`Common::train`], with `to_device`: the next batch copied on a
    /// side stream while this one computes (CUDA).
    pub(super) fn train_ahead(
        &self,
        rc: &RunCtx,
        config_id: &str,
        repeat: u32,
        make_feed: &mut dyn FnMut() -> Result<Box<dyn Feed>, UnitError>,
        non_blocking: bool,
        to_device: bool,
    ) -> Result<Vec<Run>, UnitError> {
        let unit = TrainUnit {
            exp_id: &self.id,
            config_id,
            repeat,
            epochs: self.epochs,
            model: (!self.plan.loader_only).then_some(self.plan.model),
            batch_size: self.plan.batch_size as i64,
            copy: CopyMode {
                non_blocking: non_blocking && self.cuda,
                prefetch_to_device: to_device && self.cuda,
            },
        };
        train_unit(rc, &unit, make_feed)
    }
}

/// Build the feed of one point, remembering a loader error with its worker
/// and sample for the bundle (the training loop's error carries only text).
pub(super) fn native_feed(
    common: &Common,
    p: Point,
    config_id: &str,
    last_error: &Arc<Mutex<Option<LoaderError>>>,
) -> Result<Box<dyn Feed>, UnitError> {
    let pinning = Pinning::for_device(p.pinned, common.device);
    let feed = NativeFeed::new(
        common.loader_config(p, config_id),
        common.native_spec()?.clone(),
        pinning,
    )
    .map_err(|e| UnitError::Failed(e.to_string()))?
    .with_error_slot(Arc::clone(last_error));
    Ok(Box::new(feed))
}

/// Turn a failed unit into the bundle's worker failure when the loader said why.
pub(super) fn recorded(err: UnitError, last_error: &Arc<Mutex<Option<LoaderError>>>) -> UnitError {
    match (err, last_error.lock().expect("error slot").take()) {
        (UnitError::Failed(_), Some(loader)) => UnitError::Recorded(Box::new(loader.to_failure())),
        (other, _) => other,
    }
}
