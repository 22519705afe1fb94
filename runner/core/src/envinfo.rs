//! What the runner records about the machine and the software: host (from
//! /proc), runner version and commit, libtorch, thread counts, precision.

use stallscope_bundle::{
    Environment, HostInfo, LibtorchInfo, PrecisionInfo, RunnerInfo, ThreadInfo,
};

use crate::device::DeviceCtx;
use crate::shim;

/// CPU model from /proc/cpuinfo.
pub fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// Total host memory from /proc/meminfo.
pub fn host_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

fn os_name() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
}

fn kernel() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| format!("Linux {}", s.trim()))
}

/// The 1-minute load average (/proc/loadavg): how busy the host was.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub fn host() -> HostInfo {
    HostInfo {
        cpu_model: cpu_model(),
        logical_cores: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as u32),
        memory_bytes: host_memory_bytes(),
        os: os_name(),
        kernel: kernel(),
    }
}

pub fn runner() -> RunnerInfo {
    RunnerInfo {
        name: "stallscope".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        commit: option_env!("STALLSCOPE_GIT_COMMIT").map(str::to_string),
    }
}

/// The numeric settings every run uses, set explicitly: FP32 with TF32 off
/// for matmul and cuDNN (libtorch's default leaves cuDNN's TF32 on).
pub fn apply_run_settings() -> Result<(), shim::ShimError> {
    shim::set_tf32(shim::Tf32 {
        matmul: false,
        cudnn: false,
    })
}

/// Everything but the suite and seeds, which the run adds.
pub fn environment(ctx: &DeviceCtx) -> Environment {
    let tf32 = shim::tf32().ok();
    Environment {
        runner: Some(runner()),
        command_line: std::env::args().collect(),
        suite: None,
        host: Some(host()),
        device: Some(ctx.info()),
        libtorch: Some(LibtorchInfo {
            version: shim::torch_version(),
            cuda: ctx.device_runtime(),
            cudnn: None,
            path: ctx
                .cuda_dir
                .as_ref()
                .map(|d| d.display().to_string())
                .or_else(|| option_env!("LIBTORCH").map(str::to_string)),
        }),
        wgpu: None,
        threads: Some(ThreadInfo {
            torch_intra_op: u32::try_from(tch::get_num_threads()).ok(),
            torch_inter_op: u32::try_from(tch::get_num_interop_threads()).ok(),
        }),
        precision: Some(PrecisionInfo {
            dtype: "float32".into(),
            tf32_matmul: tf32.is_some_and(|t| t.matmul),
            tf32_cudnn: tf32.is_some_and(|t| t.cudnn),
        }),
        seeds: None,
        rank: None,
    }
}
