//! The wgpu back end: any Vulkan/Metal/DX12 adapter (Debian's lavapipe
//! without a GPU). It runs `compute` and `batch_sweep` experiments of the
//! seeds/000 linear model (as WGSL passes), `transfer` experiments, and
//! `loader` and `stall` experiments fed by the native loader, through the
//! one driver; every other experiment is recorded as not
//! applicable, with the reason.

use stallscope_bundle::{Environment, Experiment, ExperimentKind, PrecisionInfo};

use super::linear::{LinearPlan, WgpuLinear};
use super::transfer::{TransferPlan, WgpuTransfer};
use super::{WgpuCtx, WgpuError, loader};
use stallscope_core::{
    Backend, Driven, ModelSpec, NotApplicable, UnitError, host_info, runner_info,
    suite::{DataSpec, ExperimentPlan, ExperimentSpec, Plan},
};

/// Learning rate of the seeds/000 classifier (SGD 0.01).
const LINEAR_LR: f32 = 0.01;

/// The wgpu back end: one device context for the whole run.
pub struct WgpuBackend {
    ctx: WgpuCtx,
}

impl WgpuBackend {
    pub fn new() -> Result<WgpuBackend, WgpuError> {
        Ok(WgpuBackend {
            ctx: WgpuCtx::new()?,
        })
    }
}

impl Backend for WgpuBackend {
    fn environment(&self) -> Environment {
        stallscope_bundle::Environment {
            runner: Some(runner_info()),
            command_line: Vec::new(),
            suite: None,
            host: Some(host_info()),
            device: Some(self.ctx.device_info()),
            libtorch: None,
            wgpu: Some(self.ctx.wgpu_info()),
            threads: None,
            precision: Some(PrecisionInfo {
                dtype: "float32".into(),
                tf32_matmul: false,
                tf32_cudnn: false,
            }),
            seeds: None,
            rank: None,
            limits: Some(stallscope_core::read_limits()),
        }
    }

    fn device_name(&self) -> String {
        self.ctx.info.name.clone()
    }

    fn title_suffix(&self) -> &str {
        " (wgpu)"
    }

    fn experiment<'a>(
        &'a self,
        p: &'a ExperimentPlan,
        suite: &'a Plan,
    ) -> Result<Box<dyn Driven + 'a>, UnitError> {
        let fail = |e: WgpuError| UnitError::Failed(e.to_string());
        Ok(match wgpu_plan(p, suite) {
            Ok(WgpuWork::Linear { kind, plan }) => {
                Box::new(WgpuLinear::new(&self.ctx, &p.id, kind, &title(p), plan).map_err(fail)?)
            }
            Ok(WgpuWork::Transfer(plan)) => {
                Box::new(WgpuTransfer::new(&self.ctx, &p.id, &title(p), plan))
            }
            Ok(WgpuWork::Loader) => Box::new(
                loader::WgpuLoader::new(&self.ctx, p, suite.seed, suite.data_seed, suite.seed)
                    .map_err(fail)?,
            ),
            Err(reason) => Box::new(NotApplicable::new(not_applicable(p, &reason))),
        })
    }
}

pub(crate) enum WgpuWork {
    Linear {
        kind: ExperimentKind,
        plan: LinearPlan,
    },
    Transfer(TransferPlan),
    /// `loader` and `stall`: the native loader feeding the linear step.
    Loader,
}

fn title(p: &ExperimentPlan) -> String {
    p.title.clone().unwrap_or_else(|| p.id.clone())
}

/// What the wgpu back end runs for an experiment, or why it cannot.
pub(crate) fn wgpu_plan(p: &ExperimentPlan, plan: &Plan) -> Result<WgpuWork, String> {
    const ONLY_LINEAR: &str = "the wgpu back end trains the seeds/000 linear classifier only; this experiment's model needs libtorch (run it with --device cpu or cuda)";
    let linear = |kind, features: i64, classes: i64, samples: usize, batch_sizes: &[i64]| {
        Ok(WgpuWork::Linear {
            kind,
            plan: LinearPlan {
                samples: samples as u32,
                features: features as u32,
                classes: classes as u32,
                batch_sizes: batch_sizes.iter().map(|b| *b as u32).collect(),
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
            epochs: p.epochs,
        })),
        ExperimentSpec::Compute { .. } | ExperimentSpec::BatchSweep { .. } => Err(ONLY_LINEAR.into()),
        ExperimentSpec::OomProbe { .. } => Err(
            "the OOM probe caps the CUDA caching allocator's memory fraction; wgpu has no such allocator".into(),
        ),
        ExperimentSpec::Loader(lp) | ExperimentSpec::Stall(lp) => match loader::unsupported(lp) {
            Some(reason) => Err(reason),
            None => Ok(WgpuWork::Loader),
        },
    }
}

fn not_applicable(p: &ExperimentPlan, reason: &str) -> Experiment {
    Experiment {
        description: None,
        swept: Vec::new(),
        settings: Default::default(),
        baseline: None,
        not_applicable: Some(reason.to_string()),
        configurations: Vec::new(),
        ..Experiment::new(p.id.clone(), p.spec.kind(), title(p))
    }
}
