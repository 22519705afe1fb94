//! GPU counters for the timeline: NVML (`libnvidia-ml.so.1`, loaded at run
//! time once per process through `nvml-wrapper`) for utilisation, memory
//! used, SM clock and PCIe throughput, and libtorch's caching allocator
//! (through the shim; reading its statistics does not synchronise) for
//! allocated and reserved bytes. Where there is no GPU or no NVML, the reason
//! is recorded instead and the host series are kept.

use std::sync::OnceLock;

use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter};
use nvml_wrapper::{Device, Nvml};
use stallscope_bundle::GpuTimeline;

/// Which GPU, if any, the epoch runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuTarget {
    /// A CUDA device by its CUDA index.
    Cuda(u32),
    /// No GPU to sample, and why (recorded as `gpu_not_available`).
    None(String),
}

/// A CUDA back end's own counters the probe reads beside NVML, without a
/// synchronisation: its caching allocator's allocated and reserved bytes,
/// and the runtime's free and total device memory. The libtorch back end
/// installs them when it opens a CUDA device ([`install_device_counters`]);
/// where none are installed (another process's GPU, as the peers' harness)
/// those series stay empty.
pub trait DeviceCounters: Send + Sync {
    /// (allocated, reserved) bytes of the allocator on CUDA device `cuda`.
    fn allocator(&self, cuda: u32) -> Option<(u64, u64)>;
    /// (free, total) bytes of CUDA device `cuda` (`cudaMemGetInfo`).
    fn mem_info(&self, cuda: u32) -> Option<(u64, u64)>;
}

static COUNTERS: OnceLock<Box<dyn DeviceCounters>> = OnceLock::new();

/// Install the back end's device counters (once per process; later calls are
/// ignored).
pub fn install_device_counters(counters: Box<dyn DeviceCounters>) {
    let _ = COUNTERS.set(counters);
}

fn counters() -> Option<&'static dyn DeviceCounters> {
    COUNTERS.get().map(|c| &**c)
}

/// NVML, initialised once per process; the error says why not.
pub fn nvml() -> Result<&'static Nvml, String> {
    static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| {
        Nvml::init().map_err(|e| format!("NVML is not available (libnvidia-ml.so.1): {e}"))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The NVML device of CUDA device `cuda`: `CUDA_VISIBLE_DEVICES` maps CUDA
/// indices to NVML indices or UUIDs; without it they are the same.
fn nvml_device(nvml: &'static Nvml, cuda: u32) -> Result<Device<'static>, String> {
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let entry = visible
        .as_deref()
        .and_then(|v| v.split(',').nth(cuda as usize).map(str::trim));
    let found = match entry {
        Some(e) if e.starts_with("GPU-") || e.starts_with("MIG-") => nvml.device_by_uuid(e),
        Some(e) => match e.parse::<u32>() {
            Ok(i) => nvml.device_by_index(i),
            Err(_) => {
                return Err(format!(
                    "CUDA_VISIBLE_DEVICES entry {e:?} is not an index or UUID"
                ));
            }
        },
        None => nvml.device_by_index(cuda),
    };
    found.map_err(|e| format!("NVML has no device for cuda:{cuda}: {e}"))
}

/// Which series still read; one that fails once stays empty for the epoch
/// (so every series keeps one entry per sample or none).
#[derive(Debug, Clone, Copy)]
struct Live {
    util: bool,
    used: bool,
    clock: bool,
    pcie: bool,
    allocator: bool,
}

/// Reads one GPU's counters on the sampler thread.
pub struct GpuProbe {
    cuda: u32,
    device: Option<Device<'static>>,
    live: Live,
}

/// Open the probe for `target`: the probe (when anything can be read) and
/// the reason for what cannot (no GPU, no NVML). Without `with_nvml`, only
/// the allocator and `cudaMemGetInfo` are read.
pub fn open(target: &GpuTarget, with_nvml: bool) -> (Option<GpuProbe>, Option<String>) {
    let cuda = match target {
        GpuTarget::None(why) => return (None, Some(why.clone())),
        GpuTarget::Cuda(i) => *i,
    };
    let found = if with_nvml {
        nvml().and_then(|n| nvml_device(n, cuda))
    } else {
        Err("NVML is not read at this interval (allocator and cudaMemGetInfo only)".into())
    };
    let (device, why) = match found {
        Ok(d) => (Some(d), None),
        Err(e) => (None, Some(e)),
    };
    let on = device.is_some();
    let probe = GpuProbe {
        cuda,
        device,
        live: Live {
            util: on,
            used: true,
            clock: on,
            pcie: on,
            allocator: counters().is_some(),
        },
    };
    (Some(probe), why)
}

fn keep<T>(live: &mut bool, series: &mut Vec<T>, value: Result<T, impl std::fmt::Debug>) {
    if !*live {
        return;
    }
    match value {
        Ok(v) => series.push(v),
        Err(_) => {
            *live = false;
            series.clear();
        }
    }
}

impl GpuProbe {
    /// Append one sample of every series still readable.
    pub fn sample(&mut self, g: &mut GpuTimeline) {
        if let Some(d) = &self.device {
            let l = &mut self.live;
            keep(
                &mut l.util,
                &mut g.utilization_percent,
                d.utilization_rates().map(|u| u.gpu),
            );
            keep(
                &mut l.used,
                &mut g.memory_used_bytes,
                d.memory_info().map(|m| m.used),
            );
            keep(&mut l.clock, &mut g.sm_clock_mhz, d.clock_info(Clock::SM));
            if l.pcie {
                // NVML reports KB/s.
                let rx = d.pcie_throughput(PcieUtilCounter::Receive);
                let tx = d.pcie_throughput(PcieUtilCounter::Send);
                let mut rx_live = true;
                keep(
                    &mut rx_live,
                    &mut g.pcie_rx_bytes_per_s,
                    rx.map(|k| k as u64 * 1024),
                );
                keep(
                    &mut l.pcie,
                    &mut g.pcie_tx_bytes_per_s,
                    tx.map(|k| k as u64 * 1024),
                );
                if !rx_live || !l.pcie {
                    l.pcie = false;
                    g.pcie_rx_bytes_per_s.clear();
                    g.pcie_tx_bytes_per_s.clear();
                }
            }
        }
        if self.live.allocator {
            match counters().and_then(|c| c.allocator(self.cuda)) {
                Some((allocated, reserved)) => {
                    g.allocated_bytes.push(allocated);
                    g.reserved_bytes.push(reserved);
                }
                None => {
                    self.live.allocator = false;
                    g.allocated_bytes.clear();
                    g.reserved_bytes.clear();
                }
            }
        }
        // Without NVML, the device's used memory as the CUDA runtime sees it
        // (`cudaMemGetInfo`, which does not synchronise either).
        if self.device.is_none() {
            let used = counters()
                .and_then(|c| c.mem_info(self.cuda))
                .map(|(free, total)| total - free.min(total))
                .ok_or("no device counters");
            keep(&mut self.live.used, &mut g.memory_used_bytes, used);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_records_why_there_is_no_gpu_series() {
        let (probe, why) = open(&GpuTarget::None("the device is the CPU".into()), true);
        assert!(probe.is_none());
        assert_eq!(why.as_deref(), Some("the device is the CPU"));
    }

    /// NVML loads exactly where the NVIDIA driver is (`/proc/driver/nvidia`),
    /// and fails cleanly with the reason where it is not.
    #[test]
    fn nvml_loads_or_says_why_not() {
        let driver = std::path::Path::new("/proc/driver/nvidia/version").exists();
        match (driver, nvml()) {
            (true, Ok(n)) => assert!(n.device_count().is_ok_and(|c| c > 0)),
            (false, Err(e)) => assert!(e.contains("NVML is not available"), "{e}"),
            (driver, got) => panic!(
                "the NVIDIA driver is {}, but NVML {}",
                if driver { "present" } else { "absent" },
                got.map_or_else(|e| format!("failed: {e}"), |_| "loaded".into())
            ),
        }
        let (probe, why) = open(&GpuTarget::Cuda(0), true);
        assert!(probe.is_some(), "the allocator series are still tried");
        if nvml().is_err() {
            assert!(why.unwrap().contains("NVML"));
        }
    }
}
