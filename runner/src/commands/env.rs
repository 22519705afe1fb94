//! `stallscope env`: what the runner records about the machine and the
//! software, as text or JSON (the bundle's `environment`).

use std::path::PathBuf;
use std::process::ExitCode;

use stallscope_torch::{DeviceCtx, DeviceRequest};

#[derive(Debug, clap::Args)]
pub struct EnvArgs {
    /// Print the bundle's `environment` object as JSON.
    #[arg(long)]
    pub json: bool,
    /// The device to describe: auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Folder holding libtorch_cuda.so.
    #[arg(long)]
    pub libtorch: Option<PathBuf>,
}

pub fn run(args: &EnvArgs) -> anyhow::Result<ExitCode> {
    let request: DeviceRequest = args.device.parse()?;
    let ctx = DeviceCtx::open(request, args.libtorch.as_deref())?;
    // Show the settings as `run` records them.
    stallscope_torch::apply_run_settings()?;
    let env = stallscope_torch::environment(&ctx);
    if args.json {
        crate::outln!("{}", serde_json::to_string_pretty(&env)?);
        return Ok(ExitCode::SUCCESS);
    }
    let opt = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
    if let Some(r) = &env.runner {
        crate::outln!(
            "runner     {} {} ({})",
            r.name,
            r.version,
            opt(r.commit.clone())
        );
    }
    if let Some(h) = &env.host {
        crate::outln!("cpu        {}", opt(h.cpu_model.clone()));
        crate::outln!("cores      {}", opt(h.logical_cores.map(|c| c.to_string())));
        crate::outln!(
            "memory     {}",
            opt(h
                .memory_bytes
                .map(|b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)))
        );
        crate::outln!("os         {}", opt(h.os.clone()));
        crate::outln!("kernel     {}", opt(h.kernel.clone()));
    }
    if let Some(d) = &env.device {
        crate::outln!("device     {} ({})", d.name, d.kind.as_str());
        if let Some(m) = d.memory_total_bytes {
            crate::outln!("  memory   {:.1} GiB", m as f64 / (1u64 << 30) as f64);
        }
        for (k, v) in [
            ("driver", &d.driver),
            ("runtime", &d.cuda_runtime),
            ("capability", &d.compute_capability),
        ] {
            if let Some(v) = v {
                crate::outln!("  {k:<8} {v}");
            }
        }
    }
    if let Some(l) = &env.libtorch {
        crate::outln!("libtorch   {} ({})", l.version, opt(l.path.clone()));
    }
    if let Some(t) = &env.threads {
        crate::outln!(
            "threads    intra-op {}, inter-op {}",
            opt(t.torch_intra_op.map(|n| n.to_string())),
            opt(t.torch_inter_op.map(|n| n.to_string()))
        );
    }
    if let Some(p) = &env.precision {
        crate::outln!(
            "precision  {}, TF32 matmul {}, TF32 cuDNN {}",
            p.dtype,
            p.tf32_matmul,
            p.tf32_cudnn
        );
    }
    Ok(ExitCode::SUCCESS)
}
