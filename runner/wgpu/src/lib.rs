//! The wgpu back end: any Vulkan, Metal or DX12 device (Debian's lavapipe,
//! a software Vulkan device, where there is no GPU). It runs the seeds/000
//! linear classifier's SGD training step as WGSL compute passes and
//! host-to-device copies, in both timing modes: whole-run waits on the queue
//! once before and once after the epoch; diagnostic waits after every stage.
//!
//! A wgpu queue submission returns before the device has finished, exactly
//! like a CUDA launch, so the methodology's rules apply unchanged.

mod backend;
mod linear;
mod loader;
mod steps;
mod trainer;
mod transfer;

pub use backend::WgpuBackend;
pub use linear::generate_data;
pub use steps::{Batches, HostBatch, WgpuSteps};
pub use trainer::LinearTrainer;

use stallscope_bundle::{DeviceInfo, DeviceKind, WgpuInfo};

/// The wgpu major version this runner is built against (recorded in bundles).
const WGPU_VERSION: &str = "30";

/// Why the wgpu device could not be used.
#[derive(Debug, thiserror::Error)]
pub enum WgpuError {
    #[error(
        "no wgpu adapter found ({0}); on Linux without a GPU install Debian's mesa-vulkan-drivers (software Vulkan), which `cargo xtask setup` does"
    )]
    NoAdapter(String),
    #[error("the wgpu adapter {adapter} refused a device: {message}")]
    Device { adapter: String, message: String },
    #[error("waiting for the wgpu queue failed: {0}")]
    Poll(String),
    #[error("reading a wgpu buffer back failed: {0}")]
    Map(String),
    #[error("{0}")]
    Invalid(String),
    #[error("interrupted (Ctrl-C)")]
    Interrupted,
}

/// The device, its queue and what to record about them; built once.
pub struct WgpuCtx {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
}

impl WgpuCtx {
    /// The first adapter wgpu offers with the highest-performance preference
    /// (a discrete GPU before an integrated one before a CPU device).
    pub fn new() -> Result<WgpuCtx, WgpuError> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
        let instance = wgpu::Instance::new(desc);
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .map_err(|e| WgpuError::NoAdapter(e.to_string()))?;
        let info = adapter.get_info();
        // Ask for everything the adapter offers: large copies need its real
        // buffer limits, not the portable defaults.
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("stallscope"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| WgpuError::Device {
            adapter: info.name.clone(),
            message: e.to_string(),
        })?;
        Ok(WgpuCtx {
            device,
            queue,
            info,
            limits,
        })
    }

    /// Block until every submitted piece of work has finished (the
    /// synchronization point of both timing modes).
    pub fn wait(&self) -> Result<(), WgpuError> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| WgpuError::Poll(e.to_string()))
    }

    /// The device as the bundle records it.
    pub fn device_info(&self) -> DeviceInfo {
        let driver = [self.info.driver.as_str(), self.info.driver_info.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        DeviceInfo {
            driver: (!driver.is_empty()).then_some(driver),
            backend: Some(format!("{:?}", self.info.backend)),
            device_type: Some(format!("{:?}", self.info.device_type)),
            ..DeviceInfo::new(DeviceKind::Wgpu, self.info.name.clone())
        }
    }

    /// The wgpu library and adapter as the bundle records them.
    pub fn wgpu_info(&self) -> WgpuInfo {
        WgpuInfo {
            version: WGPU_VERSION.to_string(),
            adapter: Some(self.info.name.clone()),
            backend: Some(format!("{:?}", self.info.backend)),
            driver: Some(self.info.driver.clone()).filter(|d| !d.is_empty()),
        }
    }

    /// The largest storage buffer this device binds.
    pub fn max_binding(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }
}
