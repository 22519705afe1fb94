//! What the libtorch back end records about its environment: the host and
//! runner (from the core's `envinfo`), the device, libtorch and its thread
//! counts, and the precision settings every run uses, set explicitly.

use stallscope_bundle::{Environment, LibtorchInfo, PrecisionInfo, ThreadInfo};
use stallscope_core::{host_info, runner_info};

use crate::device::DeviceCtx;
use crate::shim;

/// The numeric settings every run uses, set explicitly: FP32 with TF32 off
/// for matmul and cuDNN (libtorch's default leaves cuDNN's TF32 on).
pub fn apply_run_settings() -> Result<(), shim::ShimError> {
    shim::set_tf32(shim::Tf32 {
        matmul: false,
        cudnn: false,
    })
}

/// libtorch's intra-op threads (a suite's `torch_threads`).
pub fn set_torch_threads(n: i32) {
    tch::set_num_threads(n);
}

/// Everything but the suite and seeds, which the run adds.
pub fn environment(ctx: &DeviceCtx) -> Environment {
    let tf32 = shim::tf32().ok();
    Environment {
        runner: Some(runner_info()),
        command_line: std::env::args().collect(),
        suite: None,
        host: Some(host_info()),
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
        limits: Some(stallscope_core::read_limits()),
    }
}
