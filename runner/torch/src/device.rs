//! Device selection and the device context: the CPU through the linked
//! libtorch, or CUDA after loading `libtorch_cuda.so` at run time from the
//! machine's libtorch (`--libtorch`, `STALLSCOPE_LIBTORCH`, or the installed
//! PyTorch). Synchronization and memory counters go through here.

use std::path::{Path, PathBuf};

use stallscope_bundle::{DeviceInfo, DeviceKind, Memory};
use tch::Device;

use stallscope_core::{
    cost::GpuTarget,
    cost::{DeviceCounters, install_device_counters},
};

use crate::shim;

/// The caching allocator's and the runtime's counters, read through the shim
/// for the timeline's sampler (neither synchronises).
struct AllocatorCounters;

impl DeviceCounters for AllocatorCounters {
    fn allocator(&self, cuda: u32) -> Option<(u64, u64)> {
        shim::cuda_memory_stats(cuda)
            .ok()
            .map(|s| (s.allocated, s.reserved))
    }
    fn mem_info(&self, cuda: u32) -> Option<(u64, u64)> {
        shim::cuda_mem_info(cuda).ok()
    }
}

/// What the user asked for with `--device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceRequest {
    /// CUDA when a GPU and libtorch_cuda are present, else the CPU.
    Auto,
    Cpu,
    Cuda(u32),
    /// `cuda` without an index: `cuda:LOCAL_RANK` under a launcher (each
    /// rank its own GPU), else `cuda:0`.
    CudaLocal,
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("--device {0:?}: expected auto, cpu, cuda, cuda:N or (for `run`) wgpu")]
    BadRequest(String),
    #[error(
        "CUDA was asked for but no libtorch_cuda.so was found (looked in: {looked}); pass --libtorch DIR (the folder holding libtorch_cuda.so, e.g. PyTorch's torch/lib) or set STALLSCOPE_LIBTORCH"
    )]
    NoCudaLibrary { looked: String },
    #[error("cannot load {}: {message}", path.display())]
    Load { path: PathBuf, message: String },
    #[error("libtorch_cuda.so loaded from {} but CUDA is not available (no GPU visible, or a driver problem)", dir.display())]
    NotAvailable { dir: PathBuf },
    #[error("{}: libtorch {found}, but this runner is built against libtorch {expected}; expected the same major.minor (PyTorch {expected})", dir.display())]
    VersionMismatch {
        dir: PathBuf,
        found: String,
        expected: String,
    },
    #[error("cuda:{index} asked for but only {count} CUDA device(s) are visible")]
    NoSuchDevice { index: u32, count: i64 },
}

impl std::str::FromStr for DeviceRequest {
    type Err = DeviceError;
    fn from_str(s: &str) -> Result<Self, DeviceError> {
        match s {
            "auto" => Ok(DeviceRequest::Auto),
            "cpu" => Ok(DeviceRequest::Cpu),
            "cuda" => Ok(DeviceRequest::CudaLocal),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceRequest::Cuda)
                .ok_or_else(|| DeviceError::BadRequest(s.into())),
        }
    }
}

/// The device experiments run on, with what is needed to synchronize it and
/// read its memory counters.
pub struct DeviceCtx {
    pub device: Device,
    /// Where libtorch_cuda.so came from (CUDA only).
    pub cuda_dir: Option<PathBuf>,
    /// Libraries loaded at run time; kept loaded for the process's life.
    _libs: Vec<libloading::os::unix::Library>,
}

impl DeviceCtx {
    /// Select the device. `libtorch` is `--libtorch DIR`.
    pub fn open(req: DeviceRequest, libtorch: Option<&Path>) -> Result<DeviceCtx, DeviceError> {
        match req {
            DeviceRequest::Cpu => Ok(DeviceCtx::cpu()),
            DeviceRequest::Cuda(index) => DeviceCtx::cuda(index, libtorch),
            DeviceRequest::CudaLocal => DeviceCtx::cuda(0, libtorch),
            DeviceRequest::Auto => match DeviceCtx::cuda(0, libtorch) {
                Ok(ctx) => Ok(ctx),
                Err(_) => Ok(DeviceCtx::cpu()),
            },
        }
    }

    /// The device of one rank under `--device auto`: `cuda:LOCAL_RANK`, or
    /// with fewer GPUs than local ranks `cuda:(LOCAL_RANK mod count)` (ranks
    /// then share a GPU, and each bundle records its index); the CPU when
    /// there is no CUDA at all.
    pub fn for_local_rank(local_rank: u32, libtorch: Option<&Path>) -> DeviceCtx {
        match DeviceCtx::cuda(local_rank, libtorch) {
            Ok(ctx) => ctx,
            Err(DeviceError::NoSuchDevice { count, .. }) if count > 0 => {
                let index = (i64::from(local_rank) % count) as u32;
                DeviceCtx::cuda(index, libtorch).unwrap_or_else(|_| DeviceCtx::cpu())
            }
            Err(_) => DeviceCtx::cpu(),
        }
    }

    pub fn cpu() -> DeviceCtx {
        DeviceCtx {
            device: Device::Cpu,
            cuda_dir: None,
            _libs: Vec::new(),
        }
    }

    fn cuda(index: u32, libtorch: Option<&Path>) -> Result<DeviceCtx, DeviceError> {
        let (dir, libs) = load_cuda(libtorch)?;
        if !tch::Cuda::is_available() {
            return Err(DeviceError::NotAvailable { dir });
        }
        let count = tch::Cuda::device_count();
        if i64::from(index) >= count {
            return Err(DeviceError::NoSuchDevice { index, count });
        }
        install_device_counters(Box::new(AllocatorCounters));
        Ok(DeviceCtx {
            device: Device::Cuda(index as usize),
            cuda_dir: Some(dir),
            _libs: libs,
        })
    }

    pub fn kind(&self) -> DeviceKind {
        match self.device {
            Device::Cuda(_) => DeviceKind::Cuda,
            _ => DeviceKind::Cpu,
        }
    }

    /// The GPU the timeline samples (NVML and the allocator), or why none.
    pub fn gpu_target(&self) -> GpuTarget {
        match self.cuda_index() {
            Some(i) => GpuTarget::Cuda(i),
            None => GpuTarget::None("the device is the CPU".into()),
        }
    }

    pub fn is_cuda(&self) -> bool {
        matches!(self.device, Device::Cuda(_))
    }

    pub fn cuda_index(&self) -> Option<u32> {
        match self.device {
            Device::Cuda(i) => Some(i as u32),
            _ => None,
        }
    }

    /// Wait for every queued operation on the device (nothing on the CPU,
    /// where libtorch runs operations before returning).
    pub fn synchronize(&self) {
        if let Device::Cuda(i) = self.device {
            tch::Cuda::synchronize(i as i64);
        }
    }

    /// Reset the device's peak counters and the host's peak RSS (where the
    /// kernel allows it) before a measurement outside the one loop.
    pub fn reset_peaks(&self) {
        self.reset_device_peaks();
        stallscope_core::reset_peak_rss();
    }

    /// Reset the device's peak counters (CUDA's allocator; nothing on the
    /// CPU).
    pub fn reset_device_peaks(&self) {
        if let Some(i) = self.cuda_index() {
            let _ = shim::cuda_reset_peak(i);
        }
    }

    /// Release cached device memory (after a configuration, after an OOM).
    pub fn empty_cache(&self) {
        if self.is_cuda() {
            let _ = shim::cuda_empty_cache();
        }
    }

    /// The counters now: host peak RSS and, on CUDA, the allocator's peaks
    /// and the device's used/total.
    pub fn memory(&self) -> Memory {
        let mut m = Memory {
            host_peak_rss_bytes: stallscope_core::peak_rss_bytes(),
            ..Memory::default()
        };
        self.device_memory(&mut m);
        m
    }

    /// The device's counters into `m`: on CUDA the allocator's peaks and the
    /// device's used/total; nothing on the CPU.
    pub fn device_memory(&self, m: &mut Memory) {
        if let Some(i) = self.cuda_index() {
            if let Ok(s) = shim::cuda_memory_stats(i) {
                m.device_peak_allocated_bytes = Some(s.peak_allocated);
                m.device_peak_reserved_bytes = Some(s.peak_reserved);
            }
            if let Ok((free, total)) = shim::cuda_mem_info(i) {
                m.device_used_bytes = Some(total.saturating_sub(free));
                m.device_total_bytes = Some(total);
            }
        }
    }

    /// The CUDA runtime version libtorch uses (CUDA only).
    pub fn device_runtime(&self) -> Option<String> {
        self.cuda_index().and_then(|i| cuda_properties(i).runtime)
    }

    /// What the bundle records about the device.
    pub fn info(&self) -> DeviceInfo {
        match self.cuda_index() {
            None => DeviceInfo {
                memory_total_bytes: stallscope_core::host_memory_bytes(),
                ..DeviceInfo::new(
                    DeviceKind::Cpu,
                    stallscope_core::cpu_model().unwrap_or_else(|| "CPU".into()),
                )
            },
            Some(i) => {
                let props = cuda_properties(i);
                DeviceInfo {
                    index: Some(i),
                    memory_total_bytes: shim::cuda_mem_info(i).ok().map(|(_, t)| t),
                    driver: props.driver,
                    cuda_runtime: props.runtime,
                    compute_capability: props.capability,
                    ..DeviceInfo::new(
                        DeviceKind::Cuda,
                        props.name.unwrap_or_else(|| format!("CUDA device {i}")),
                    )
                }
            }
        }
    }
}

/// Where to look for libtorch_cuda.so, in order.
pub fn cuda_search_dirs(explicit: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = explicit {
        dirs.push(d.to_path_buf());
        dirs.push(d.join("lib"));
    }
    if let Some(d) = std::env::var_os("STALLSCOPE_LIBTORCH") {
        let d = PathBuf::from(d);
        dirs.push(d.join("lib"));
        dirs.push(d);
    }
    for d in stallscope_python::torch_lib_dirs() {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// The first of `dirs` that holds `libtorch_cuda.so`; the error lists them all.
fn find_cuda_dir(dirs: &[PathBuf]) -> Result<PathBuf, DeviceError> {
    if let Some(dir) = dirs.iter().find(|d| d.join("libtorch_cuda.so").is_file()) {
        return Ok(dir.clone());
    }
    let looked = if dirs.is_empty() {
        "no candidate folder".to_string()
    } else {
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(DeviceError::NoCudaLibrary { looked })
}

fn load_cuda(
    explicit: Option<&Path>,
) -> Result<(PathBuf, Vec<libloading::os::unix::Library>), DeviceError> {
    let dir = find_cuda_dir(&cuda_search_dirs(explicit))?;
    if let Some(found) = libtorch_version_at(&dir) {
        let expected = shim::torch_version();
        let major_minor = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
        if major_minor(&found) != major_minor(&expected) {
            return Err(DeviceError::VersionMismatch {
                dir,
                found,
                expected,
            });
        }
    }
    let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL;
    let mut libs = Vec::new();
    for name in ["libc10_cuda.so", "libtorch_cuda.so"] {
        let path = dir.join(name);
        if !path.is_file() {
            continue;
        }
        // SAFETY: loading libtorch's own CUDA libraries, whose initialisers
        // register the CUDA back end with the already-loaded libtorch.
        let lib =
            unsafe { libloading::os::unix::Library::open(Some(&path), flags) }.map_err(|e| {
                DeviceError::Load {
                    path: path.clone(),
                    message: e.to_string(),
                }
            })?;
        libs.push(lib);
    }
    Ok((dir, libs))
}

/// The version of the libtorch whose `lib/` is `dir`: PyTorch's
/// `torch/version.py` or a libtorch archive's `build-version`.
pub fn libtorch_version_at(dir: &Path) -> Option<String> {
    let parent = dir.parent()?;
    if let Ok(text) = std::fs::read_to_string(parent.join("version.py")) {
        return text.lines().find_map(|l| {
            let v = l.strip_prefix("__version__")?.split(['\'', '"']).nth(1)?;
            Some(v.to_string())
        });
    }
    std::fs::read_to_string(parent.join("build-version"))
        .ok()
        .map(|s| s.trim().to_string())
}

#[derive(Default)]
struct CudaProps {
    name: Option<String>,
    driver: Option<String>,
    runtime: Option<String>,
    capability: Option<String>,
}

/// Name, driver and runtime versions and compute capability, through the
/// CUDA driver and runtime C APIs (already loaded by libtorch_cuda).
fn cuda_properties(index: u32) -> CudaProps {
    type GetName = unsafe extern "C" fn(*mut std::ffi::c_char, i32, i32) -> i32;
    type GetVersion = unsafe extern "C" fn(*mut i32) -> i32;
    type GetAttr = unsafe extern "C" fn(*mut i32, i32, i32) -> i32;
    let mut props = CudaProps::default();
    let ver = |v: i32| format!("{}.{}", v / 1000, (v % 1000) / 10);
    // SAFETY: the signatures are those of the CUDA driver/runtime C APIs;
    // buffers are sized as passed.
    unsafe {
        if let Ok(cuda) = libloading::Library::new("libcuda.so.1") {
            if let Ok(f) = cuda.get::<GetName>(b"cuDeviceGetName") {
                let mut buf = [0 as std::ffi::c_char; 256];
                if f(buf.as_mut_ptr(), 256, index as i32) == 0 {
                    props.name = Some(
                        std::ffi::CStr::from_ptr(buf.as_ptr())
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            }
            if let Ok(f) = cuda.get::<GetVersion>(b"cuDriverGetVersion") {
                let mut v = 0;
                if f(&mut v) == 0 {
                    props.driver = Some(format!("CUDA driver API {}", ver(v)));
                }
            }
            std::mem::forget(cuda);
        }
        let this = libloading::os::unix::Library::this();
        if let Ok(f) = this.get::<GetVersion>(b"cudaRuntimeGetVersion") {
            let mut v = 0;
            if f(&mut v) == 0 {
                props.runtime = Some(ver(v));
            }
        }
        if let Ok(f) = this.get::<GetAttr>(b"cudaDeviceGetAttribute") {
            let (mut major, mut minor) = (0, 0);
            // cudaDevAttrComputeCapabilityMajor = 75, Minor = 76.
            if f(&mut major, 75, index as i32) == 0 && f(&mut minor, 76, index as i32) == 0 {
                props.capability = Some(format!("{major}.{minor}"));
            }
        }
    }
    props
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_requests_parse() {
        assert_eq!(
            "cuda:1".parse::<DeviceRequest>().unwrap(),
            DeviceRequest::Cuda(1)
        );
        assert_eq!(
            "cuda".parse::<DeviceRequest>().unwrap(),
            DeviceRequest::CudaLocal
        );
        assert_eq!(
            "auto".parse::<DeviceRequest>().unwrap(),
            DeviceRequest::Auto
        );
        let e = "gpu".parse::<DeviceRequest>().unwrap_err().to_string();
        assert!(
            e.contains("expected auto, cpu, cuda, cuda:N or (for `run`) wgpu"),
            "{e}"
        );
    }

    #[test]
    fn missing_cuda_library_is_a_clear_error() {
        // Only the folders given are searched, so this holds on a machine
        // with CUDA too.
        let dir = tempfile::tempdir().unwrap();
        let e = find_cuda_dir(&[dir.path().to_path_buf(), dir.path().join("lib")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no libtorch_cuda.so was found"), "{e}");
        assert!(e.contains(&dir.path().display().to_string()), "{e}");
        assert!(e.contains("pass --libtorch DIR"), "{e}");
        std::fs::write(dir.path().join("libtorch_cuda.so"), b"x").unwrap();
        assert_eq!(
            find_cuda_dir(&[dir.path().join("lib"), dir.path().to_path_buf()]).unwrap(),
            dir.path()
        );
    }

    #[test]
    fn a_libtorch_of_another_version_is_refused_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let lib = root.join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(root.join("version.py"), "__version__ = '2.5.1+cu121'\n").unwrap();
        std::fs::write(lib.join("libtorch_cuda.so"), b"not a library").unwrap();
        assert_eq!(libtorch_version_at(&lib).as_deref(), Some("2.5.1+cu121"));
        let e = DeviceCtx::open(DeviceRequest::Cuda(0), Some(&lib))
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("libtorch 2.5.1+cu121, but this runner is built against libtorch 2.11.0"),
            "{e}"
        );
        std::fs::write(root.join("version.py"), "__version__ = '2.11.0+cu130'\n").unwrap();
        let e = DeviceCtx::open(DeviceRequest::Cuda(0), Some(&lib))
            .err()
            .expect("not a library")
            .to_string();
        assert!(
            e.contains("cannot load") && e.contains("libtorch_cuda.so"),
            "{e}"
        );
    }
}
