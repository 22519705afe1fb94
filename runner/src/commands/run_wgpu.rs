//! `stallscope run --device wgpu`: the suite's experiments on the wgpu back
//! end. What wgpu runs: `compute` and `batch_sweep` experiments of the
//! seeds/000 linear model (trained as WGSL passes) and `transfer`
//! experiments; every other experiment is recorded as not applicable, with
//! the reason. The bundle is written atomically after every configuration.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::Context;
use stallscope_bundle::{
    Bundle, Experiment, ExperimentKind, PrecisionInfo, Provenance, RunState, RunStatus,
    SchemaVersion, Seeds, SuiteRecord,
};

use super::run::{STOP, bundle_id, exit_code, final_status, install_ctrlc, print_report};
use crate::bundle_file::write_atomic;
use crate::cli::RunArgs;
use crate::envinfo;
use crate::models::ModelSpec;
use crate::suite::{DataSpec, ExperimentPlan, ExperimentSpec, Plan};
use crate::wgpu_backend::{
    LinearPlan, TransferPlan, WgpuCtx, linear_experiment, transfer_experiment,
};

/// Learning rate of the seeds/000 classifier (SGD 0.01).
const LINEAR_LR: f32 = 0.01;

pub fn run(plan: &Plan, args: &RunArgs) -> anyhow::Result<ExitCode> {
    let ctx = WgpuCtx::new()?;
    let seeds = Seeds {
        weights: plan.seed,
        shuffle: plan.seed,
        data: plan.data_seed,
    };
    let environment = stallscope_bundle::Environment {
        runner: Some(envinfo::runner()),
        command_line: std::env::args().collect(),
        suite: Some(SuiteRecord {
            name: plan.name.clone(),
            path: plan.path.as_ref().map(|p| p.display().to_string()),
            toml: plan.toml.clone(),
        }),
        host: Some(envinfo::host()),
        device: Some(ctx.device_info()),
        libtorch: None,
        wgpu: Some(ctx.wgpu_info()),
        threads: None,
        precision: Some(PrecisionInfo {
            dtype: "float32".into(),
            tf32_matmul: false,
            tf32_cudnn: false,
        }),
        seeds: Some(seeds),
    };
    let (created_at, id) = bundle_id();
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out").join(&id));
    let path = out_dir.join("bundle.json");
    install_ctrlc()?;
    let mut bundle = Bundle {
        schema_version: SchemaVersion::CURRENT,
        id,
        title: format!("{} on {} (wgpu)", plan.title, ctx.info.name),
        created_at,
        provenance: Provenance::Measured,
        environment,
        experiments: Vec::new(),
        status: RunStatus {
            state: RunState::Running,
            message: None,
        },
        notes: Vec::new(),
    };
    write_atomic(&path, &bundle).with_context(|| format!("writing {}", path.display()))?;

    let mut interrupted = false;
    let mut failures = 0usize;
    for p in &plan.experiments {
        let index = bundle.experiments.len();
        // Listed (empty) while it runs; a running bundle may hold it so.
        let mut placeholder = not_applicable(p, "");
        placeholder.not_applicable = None;
        bundle.experiments.push(placeholder);
        let mut save = |e: &Experiment| {
            bundle.experiments[index] = e.clone();
            // Keep going on a write error; the final write reports it.
            let _ = write_atomic(&path, &bundle);
        };
        let (experiment, stopped) = match wgpu_plan(p, plan) {
            Ok(WgpuWork::Linear { kind, plan: lp }) => {
                linear_experiment(&ctx, &p.id, kind, &title(p), &lp, &STOP, &mut save)?
            }
            Ok(WgpuWork::Transfer(tp)) => {
                transfer_experiment(&ctx, &p.id, &title(p), &tp, &STOP, &mut save)
            }
            Err(reason) => (not_applicable(p, &reason), false),
        };
        failures += experiment
            .configurations
            .iter()
            .filter(|c| c.failure.is_some())
            .count();
        bundle.experiments[index] = experiment;
        if stopped || STOP.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
    }
    bundle.status = final_status(interrupted, failures);
    write_atomic(&path, &bundle).with_context(|| format!("writing {}", path.display()))?;
    print_report(&bundle, &path, args.output.style());
    Ok(exit_code(interrupted, failures))
}

enum WgpuWork {
    Linear {
        kind: ExperimentKind,
        plan: LinearPlan,
    },
    Transfer(TransferPlan),
}

fn title(p: &ExperimentPlan) -> String {
    p.title.clone().unwrap_or_else(|| p.id.clone())
}

/// What the wgpu back end runs for an experiment, or why it cannot.
fn wgpu_plan(p: &ExperimentPlan, plan: &Plan) -> Result<WgpuWork, String> {
    const ONLY_LINEAR: &str = "the wgpu back end trains the seeds/000 linear classifier only; this experiment's model needs libtorch (run it with --device cpu or cuda)";
    let linear = |kind, features: i64, classes: i64, samples: usize, batch_sizes: &[i64]| {
        Ok(WgpuWork::Linear {
            kind,
            plan: LinearPlan {
                samples: samples as u32,
                features: features as u32,
                classes: classes as u32,
                batch_sizes: batch_sizes.iter().map(|b| *b as u32).collect(),
                repeats: p.repeats,
                epochs: p.epochs,
                lr: LINEAR_LR,
                weight_seed: plan.seed,
                data_seed: plan.data_seed,
                shuffle_seed: plan.seed,
                record_steps: true,
            },
        })
    };
    match &p.spec {
        ExperimentSpec::Compute {
            model: ModelSpec::Linear { features, classes },
            batch_sizes,
            steps,
        } => {
            // One epoch = `steps` steps of the largest batch.
            let largest = batch_sizes.iter().copied().max().unwrap_or(1) as usize;
            linear(ExperimentKind::Compute, *features, *classes, largest * *steps as usize, batch_sizes)
        }
        ExperimentSpec::BatchSweep {
            model: ModelSpec::Linear { features, classes },
            data: DataSpec::Tensor { samples, .. },
            batch_sizes,
        } => linear(ExperimentKind::BatchSweep, *features, *classes, *samples, batch_sizes),
        ExperimentSpec::Transfer { sizes_bytes, copies, .. } => Ok(WgpuWork::Transfer(TransferPlan {
            sizes_bytes: sizes_bytes.clone(),
            copies: *copies,
            repeats: p.repeats,
        })),
        ExperimentSpec::Compute { .. } | ExperimentSpec::BatchSweep { .. } => Err(ONLY_LINEAR.into()),
        ExperimentSpec::OomProbe { .. } => Err(
            "the OOM probe caps the CUDA caching allocator's memory fraction; wgpu has no such allocator".into(),
        ),
        #[allow(unreachable_patterns)]
        _ => Err("the wgpu back end does not run this kind of experiment (the loader feeds libtorch tensors)".into()),
    }
}

fn not_applicable(p: &ExperimentPlan, reason: &str) -> Experiment {
    let kind = match &p.spec {
        ExperimentSpec::Compute { .. } => ExperimentKind::Compute,
        ExperimentSpec::Transfer { .. } => ExperimentKind::Transfer,
        ExperimentSpec::BatchSweep { .. } => ExperimentKind::BatchSweep,
        ExperimentSpec::OomProbe { .. } => ExperimentKind::OomProbe,
        ExperimentSpec::Stall(_) => ExperimentKind::Stall,
        #[allow(unreachable_patterns)]
        _ => ExperimentKind::Loader,
    };
    Experiment {
        id: p.id.clone(),
        kind,
        title: title(p),
        description: None,
        swept: Vec::new(),
        settings: Default::default(),
        baseline: None,
        not_applicable: Some(reason.to_string()),
        configurations: Vec::new(),
    }
}
