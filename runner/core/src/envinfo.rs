//! What the runner records about the host and itself, whatever the back
//! end: the host (from /proc) and the runner's version and commit. Each back
//! end adds its device, library and precision (`stallscope-torch`'s
//! `environment`, `stallscope-wgpu`'s `WgpuBackend`).

use stallscope_bundle::{HostInfo, RunnerInfo};

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

pub fn host_info() -> HostInfo {
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

pub fn runner_info() -> RunnerInfo {
    RunnerInfo {
        name: "stallscope".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        commit: option_env!("STALLSCOPE_GIT_COMMIT").map(str::to_string),
    }
}
