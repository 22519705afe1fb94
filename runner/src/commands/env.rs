//! `stallscope env`: what the runner records about the machine and the
//! software, as text or JSON (the bundle's `environment`).

use std::process::ExitCode;

use crate::cli::EnvArgs;
use stallscope_torch::device::{DeviceCtx, DeviceRequest};
use stallscope_torch::environment as envinfo;

pub fn run(args: &EnvArgs) -> anyhow::Result<ExitCode> {
    let request: DeviceRequest = args.device.parse()?;
    let ctx = DeviceCtx::open(request, args.libtorch.as_deref())?;
    // Show the settings as `run` records them.
    envinfo::apply_run_settings()?;
    let env = envinfo::environment(&ctx);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&env)?);
        return Ok(ExitCode::SUCCESS);
    }
    let opt = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
    if let Some(r) = &env.runner {
        println!(
            "runner     {} {} ({})",
            r.name,
            r.version,
            opt(r.commit.clone())
        );
    }
    if let Some(h) = &env.host {
        println!("cpu        {}", opt(h.cpu_model.clone()));
        println!("cores      {}", opt(h.logical_cores.map(|c| c.to_string())));
        println!(
            "memory     {}",
            opt(h
                .memory_bytes
                .map(|b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)))
        );
        println!("os         {}", opt(h.os.clone()));
        println!("kernel     {}", opt(h.kernel.clone()));
    }
    if let Some(d) = &env.device {
        println!("device     {} ({})", d.name, d.kind.as_str());
        if let Some(m) = d.memory_total_bytes {
            println!("  memory   {:.1} GiB", m as f64 / (1u64 << 30) as f64);
        }
        for (k, v) in [
            ("driver", &d.driver),
            ("runtime", &d.cuda_runtime),
            ("capability", &d.compute_capability),
        ] {
            if let Some(v) = v {
                println!("  {k:<8} {v}");
            }
        }
    }
    if let Some(l) = &env.libtorch {
        println!("libtorch   {} ({})", l.version, opt(l.path.clone()));
    }
    if let Some(t) = &env.threads {
        println!(
            "threads    intra-op {}, inter-op {}",
            opt(t.torch_intra_op.map(|n| n.to_string())),
            opt(t.torch_inter_op.map(|n| n.to_string()))
        );
    }
    if let Some(p) = &env.precision {
        println!(
            "precision  {}, TF32 matmul {}, TF32 cuDNN {}",
            p.dtype, p.tf32_matmul, p.tf32_cudnn
        );
    }
    Ok(ExitCode::SUCCESS)
}
