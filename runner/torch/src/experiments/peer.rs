//! A peer configuration of a loader sweep as a harness request: the same
//! source (the tensor source's very bytes, the image files in the native
//! order), the same batches of every epoch, the same model and seeds.

use serde_json::json;

use super::common::RunCtx;
use super::loader_common::Common;
use super::peer_source::peer_source;
use stallscope_core::{
    UnitError,
    grid::{Point, loader_config},
    suite::{DataPlan, LoaderPlan},
};
use stallscope_loader::epoch_batches;
use stallscope_peers::{LoaderRequest, PROTOCOL, PeerUnit, Request};

/// Run point `p` (a peer engine) once, in a fresh harness.
pub(super) fn run_unit(
    common: &Common,
    p: Point,
    config_id: &str,
    repeat: u32,
    rc: &RunCtx,
) -> Result<Vec<Run>, UnitError> {
    let lp = &common.plan;
    let cfg = loader_config(lp, p, common.shuffle_seed);
    let python = matches!(lp.data, DataPlan::Python { .. });
    let batches = (!python).then(|| {
        (0..common.epochs)
            .map(|e| epoch_batches(cfg.sampler, common.samples, lp.batch_size, lp.drop_last, e))
            .collect()
    });
    let request = Request {
        protocol: PROTOCOL,
        engine: p.engine.as_str(),
        device: match common.device {
            tch::Device::Cuda(n) => format!("cuda:{n}"),
            _ => "cpu".into(),
        },
        torch_threads: Some(tch::get_num_threads()),
        weights_seed: common.weights_seed,
        model: model_json(lp),
        optimizer: match lp.python_model {
            // Unless the factory returns its own: SGD 0.01, as the linear
            // classifier of seeds/000.
            Some(_) => json!({"name": "sgd", "lr": 0.01}),
            None => stallscope_peers::optimizer_json(lp.model),
        },
        source: common
            .peer_source
            .get_or_init(|| peer_source(&common.id, &common.plan.data, common.spec.as_ref()))
            .as_ref()
            .map_err(|e| UnitError::Failed(e.clone()))?
            .json
            .clone(),
        loader: LoaderRequest {
            batch_size: lp.batch_size,
            workers: p.workers,
            prefetch: p.prefetch.max(1),
            persistent: p.persistent,
            pin_memory: p.pinned && common.cuda,
            context: p.context.as_str(),
            drop_last: lp.drop_last,
            concurrency: p.workers.max(1),
            spdl_workers: p.kind.as_str(),
            prefetch_to_device: p.to_device,
            batched_fetch: p.batched,
            dali_device: p.dali_device.as_str(),
            worker_kind: p.kind.as_str(),
        },
        non_blocking: p.pinned && common.cuda,
        epochs: common.epochs,
        modes: vec!["whole_run", "diagnostic"],
        batches,
        shuffle: python.then_some(lp.shuffle),
        shuffle_seed: python.then_some(common.shuffle_seed),
        augment_seed: common.shuffle_seed,
        dist: dist_request(&common.id, config_id, repeat, lp.loader_only),
    };
    stallscope_peers::run_unit(&PeerUnit {
        engine: p.engine,
        exp_id: &common.id,
        config_id,
        repeat,
        request,
        // A user's model: every configuration must build what the first did.
        expected_parameters: common
            .parameters
            .or_else(|| common.first_hello.get().map(|h| h.parameters)),
        first_hello: lp.python_model.as_ref().map(|_| &common.first_hello),
        stop: rc.stop,
        progress: rc.progress,
    })
}

/// The request's model: the user's (`model = "python"`, imported from the
/// python source's folder) or one of the native models.
fn model_json(lp: &LoaderPlan) -> serde_json::Value {
    match (&lp.python_model, &lp.data) {
        (Some(m), DataPlan::Python { path, .. }) => stallscope_peers::python_model_json(m, path),
        _ => stallscope_peers::model_json(lp.model, lp.loader_only),
    }
}

/// With several ranks, the harness trains with DDP on a process group built
/// on the run's c10d store under a prefix of this unit's own (the same on
/// every rank, since every rank runs the same units in the same order). A
/// loader-only unit has no gradients: its ranks do not meet.
fn dist_request(
    exp_id: &str,
    config_id: &str,
    repeat: u32,
    loader_only: bool,
) -> Option<stallscope_peers::DistRequest> {
    let l = &stallscope_core::ranks::current()?.layout;
    (l.world_size > 1 && !loader_only).then(|| stallscope_peers::DistRequest {
        rank: l.rank,
        world_size: l.world_size,
        master_addr: l.master_addr.clone(),
        master_port: l.master_port,
        prefix: format!(
            "stallscope-peer/{}/{exp_id}/{config_id}/r{repeat}/",
            l.job_id.as_deref().unwrap_or("run")
        ),
        timeout_s: l.timeout_s.unwrap_or(300.0),
    })
}

use stallscope_bundle::Run;
