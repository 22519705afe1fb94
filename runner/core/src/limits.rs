//! The machine's real limits (the bundle's `HostLimits`, format 1.5): the
//! CPUs this process may keep busy (its affinity mask, and the cgroup CPU
//! quota rounded up), the memory its processes may hold before the kernel
//! kills one (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`, else the
//! physical `MemTotal`), and `/dev/shm`'s size and free space.
//!
//! The cgroup files are found the way the kernel lays them out:
//! `/proc/self/cgroup` names the process's cgroup per hierarchy (v1 lines
//! name their controllers; the v2 line is `0::PATH`), `/proc/self/mountinfo`
//! where each hierarchy is mounted and which cgroup is its root (a container
//! without a cgroup namespace sees only its own subtree), and every level
//! from the process's cgroup up to the mount's root is read: a parent's
//! limit binds its children, so the smallest wins. `max` and `-1` mean no
//! limit; so does v1's "no limit" memory figure (`PAGE_COUNTER_MAX` pages,
//! 9223372036854771712 with 4 KiB pages), and any limit above the physical
//! memory is the physical memory. Everything is read under a root
//! ([`read_limits_under`]) so that fixture trees test each layout.

use std::path::{Path, PathBuf};

use stallscope_bundle::HostLimits;

/// A v1 memory limit at or above this is v1's "no limit".
const V1_UNLIMITED: u64 = 1 << 62;

/// This machine's limits, for this process.
pub fn read_limits() -> HostLimits {
    read_limits_under(
        Path::new("/"),
        affinity_cpus(),
        shm_space(Path::new("/dev/shm")),
    )
}

/// The limits read from the `/proc` and `/sys/fs/cgroup` files under
/// `root`, for a process whose affinity mask holds `affinity` CPUs (0:
/// unknown) and whose `/dev/shm` has `(total, free)` bytes.
pub fn read_limits_under(root: &Path, affinity: usize, shm: Option<(u64, u64)>) -> HostLimits {
    let mut notes = Vec::new();
    let groups = Cgroups::read(root, &mut notes);
    let quota = groups.as_ref().and_then(|g| g.cpu_quota(&mut notes));
    let cgroup_memory = groups.as_ref().and_then(|g| g.memory_limit(&mut notes));
    let physical = mem_total(root);
    if physical.is_none() {
        notes.push("/proc/meminfo has no MemTotal: the physical memory is unknown".into());
    }
    let memory = match (cgroup_memory, physical) {
        (Some((bytes, source)), Some(total)) if bytes >= total => {
            notes.push(format!(
                "{source} allows {bytes} bytes, above the physical memory: the physical memory \
                 binds"
            ));
            Some((total, "/proc/meminfo MemTotal".to_string()))
        }
        (Some(limit), _) => Some(limit),
        (None, Some(total)) => Some((total, "/proc/meminfo MemTotal".to_string())),
        (None, None) => None,
    };
    if shm.is_none() {
        notes.push("/dev/shm could not be read (statvfs)".into());
    }
    let affinity = u32::try_from(affinity).ok().filter(|a| *a > 0);
    let by_quota = quota.as_ref().map(|(q, _)| q.ceil().max(1.0) as u32);
    HostLimits {
        usable_cpus: [affinity, by_quota]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(1),
        affinity_cpus: affinity,
        cpu_quota_cores: quota.as_ref().map(|(q, _)| *q),
        cpu_quota_source: quota.map(|(_, s)| s),
        memory_limit_bytes: memory.as_ref().map(|(b, _)| *b),
        memory_limit_source: memory.map(|(_, s)| s),
        shm_total_bytes: shm.map(|(t, _)| t),
        shm_free_bytes: shm.map(|(_, f)| f),
        sharing_strategy: None,
        notes,
    }
}

/// CPUs in this process's affinity mask (0 when it cannot be read).
pub fn affinity_cpus() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; the kernel fills
        // at most its size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if unsafe { libc::sched_getaffinity(0, size, &mut set) } == 0 {
            return unsafe { libc::CPU_COUNT(&set) } as usize;
        }
    }
    0
}

/// `(total, free)` bytes of the filesystem at `path` (free to this user).
pub fn shm_space(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is a valid C string; `st` is written by statvfs.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let unit = st.f_frsize as u64;
    Some((st.f_blocks as u64 * unit, st.f_bavail as u64 * unit))
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(root: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(root.join("proc/meminfo")).ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// One line of `/proc/self/cgroup`: `ID:CONTROLLERS:PATH`.
struct Membership {
    controllers: Vec<String>,
    path: String,
}

/// One cgroup mount of `/proc/self/mountinfo`.
struct Mount {
    /// The cgroup that is the mount's root (`/` unless namespaced away).
    root: String,
    point: String,
    v2: bool,
    controllers: Vec<String>,
}

/// The process's cgroups and the mounts they are reached through.
struct Cgroups {
    root: PathBuf,
    members: Vec<Membership>,
    mounts: Vec<Mount>,
}

/// A cgroup directory to read from, and the mount point reading stops at.
struct Place {
    dir: PathBuf,
    top: PathBuf,
    v2: bool,
}

impl Cgroups {
    fn read(root: &Path, notes: &mut Vec<String>) -> Option<Cgroups> {
        let Ok(text) = std::fs::read_to_string(root.join("proc/self/cgroup")) else {
            notes.push("/proc/self/cgroup could not be read: no cgroup limits were read".into());
            return None;
        };
        let members = text
            .lines()
            .filter_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                Some(Membership {
                    controllers: split_controllers(controllers),
                    path: path.to_string(),
                })
            })
            .collect();
        let mounts = std::fs::read_to_string(root.join("proc/self/mountinfo"))
            .map(|t| t.lines().filter_map(parse_mount).collect())
            .unwrap_or_default();
        Some(Cgroups {
            root: root.to_path_buf(),
            members,
            mounts,
        })
    }

    /// Where `controller`'s files are: its v1 hierarchy if it has one, else
    /// the v2 hierarchy.
    fn place(&self, controller: &str) -> Option<Place> {
        let v1 = self
            .members
            .iter()
            .find(|m| m.controllers.iter().any(|c| c == controller));
        let (member, v2) = match v1 {
            Some(m) => (m, false),
            None => (
                self.members.iter().find(|m| m.controllers.is_empty())?,
                true,
            ),
        };
        let mount = self
            .mounts
            .iter()
            .find(|m| m.v2 == v2 && (v2 || m.controllers.iter().any(|c| c == controller)));
        let (mount_root, point) = match mount {
            Some(m) => (m.root.as_str(), PathBuf::from(&m.point)),
            None => ("/", self.default_mount(&member.controllers, v2)),
        };
        let rel = member
            .path
            .strip_prefix(mount_root)
            .unwrap_or(&member.path)
            .trim_start_matches('/');
        let top = self.under(&point);
        let dir = top.join(rel);
        Some(Place {
            dir: if dir.is_dir() { dir } else { top.clone() },
            top,
            v2,
        })
    }

    /// `/sys/fs/cgroup` (v2), or `/sys/fs/cgroup/cpu,cpuacct` and its
    /// per-controller link (v1) when mountinfo does not say.
    fn default_mount(&self, controllers: &[String], v2: bool) -> PathBuf {
        let base = PathBuf::from("/sys/fs/cgroup");
        if v2 {
            return base;
        }
        let joined = base.join(controllers.join(","));
        if self.under(&joined).is_dir() {
            joined
        } else {
            base.join(controllers.first().map_or("", String::as_str))
        }
    }

    /// An absolute path of the machine, under the root read.
    fn under(&self, path: &Path) -> PathBuf {
        self.root.join(path.strip_prefix("/").unwrap_or(path))
    }

    /// The machine's absolute path of a file under the root read.
    fn shown(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        format!("/{}", rel.display())
    }

    /// Each level's file `name` from the process's cgroup up to the mount,
    /// parsed by `read`; the smallest limit and the file it came from.
    fn smallest<T: PartialOrd + Copy>(
        &self,
        place: &Place,
        name: &str,
        read: impl Fn(&Path) -> Option<T>,
    ) -> Option<(T, String)> {
        let mut best: Option<(T, String)> = None;
        let mut dir = Some(place.dir.as_path());
        while let Some(d) = dir {
            if let Some(v) = read(&d.join(name))
                && best.as_ref().is_none_or(|(b, _)| v < *b)
            {
                best = Some((v, self.shown(&d.join(name))));
            }
            dir = d.parent().filter(|_| d != place.top);
        }
        best
    }

    /// The CPU quota in cores and its file; `None` when none is in force.
    fn cpu_quota(&self, notes: &mut Vec<String>) -> Option<(f64, String)> {
        let place = self.place("cpu")?;
        let found = if place.v2 {
            self.smallest(&place, "cpu.max", read_cpu_max)
        } else {
            self.smallest(&place, "cpu.cfs_quota_us", read_cfs_quota)
        };
        if found.is_none() {
            let file = if place.v2 {
                "cpu.max"
            } else {
                "cpu.cfs_quota_us"
            };
            notes.push(format!(
                "no CPU quota in force ({} and above: max, -1 or absent)",
                self.shown(&place.dir.join(file))
            ));
        }
        found
    }

    /// The cgroup memory limit and its file; `None` when none is in force.
    fn memory_limit(&self, notes: &mut Vec<String>) -> Option<(u64, String)> {
        let place = self.place("memory")?;
        let file = if place.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        let found = self.smallest(&place, file, |p| read_memory_limit(p, place.v2));
        if found.is_none() {
            notes.push(format!(
                "no cgroup memory limit in force ({} and above)",
                self.shown(&place.dir.join(file))
            ));
        }
        found
    }
}

fn split_controllers(s: &str) -> Vec<String> {
    s.split(',')
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

/// A cgroup mount from a mountinfo line: `ID PARENT MAJ:MIN ROOT POINT
/// OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS`.
fn parse_mount(line: &str) -> Option<Mount> {
    let (left, right) = line.split_once(" - ")?;
    let left: Vec<&str> = left.split_whitespace().collect();
    let right: Vec<&str> = right.split_whitespace().collect();
    let fstype = *right.first()?;
    let v2 = match fstype {
        "cgroup2" => true,
        "cgroup" => false,
        _ => return None,
    };
    Some(Mount {
        root: left.get(3)?.to_string(),
        point: left.get(4)?.to_string(),
        v2,
        controllers: right.get(2).map_or(Vec::new(), |o| split_controllers(o)),
    })
}

/// cgroup v2 `cpu.max`: `QUOTA PERIOD`, or `max PERIOD` (no quota).
fn read_cpu_max(path: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut parts = text.split_whitespace();
    let quota: f64 = parts.next()?.parse().ok()?;
    let period: f64 = parts.next().unwrap_or("100000").parse().ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// cgroup v1 `cpu.cfs_quota_us` (-1: no quota) over `cpu.cfs_period_us`
/// beside it.
fn read_cfs_quota(path: &Path) -> Option<f64> {
    let quota: f64 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    let period_file = path.with_file_name("cpu.cfs_period_us");
    let period: f64 = std::fs::read_to_string(period_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// `memory.max` (`max`: none) or `memory.limit_in_bytes` (v1's huge "no
/// limit" figure: none).
fn read_memory_limit(path: &Path, v2: bool) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let bytes: u64 = text.trim().parse().ok()?;
    (bytes > 0 && (v2 || bytes < V1_UNLIMITED)).then_some(bytes)
}

#[cfg(test)]
#[path = "limits/tests.rs"]
mod tests;
