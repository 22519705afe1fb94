//! Readers of the kernel's per-process and per-thread counters: CPU time
//! from `getrusage` (this process, this thread) and `/proc/PID/stat` or
//! `/proc/self/task/TID/stat` (others, in clock ticks), resident memory from
//! `/proc/self/statm` and the stat's `rss`, peak memory from `VmHWM`.

use std::sync::OnceLock;

/// User and system CPU-seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuTimes {
    pub user_s: f64,
    pub system_s: f64,
}

impl CpuTimes {
    pub fn total(self) -> f64 {
        self.user_s + self.system_s
    }
    /// `self - earlier`, never below zero (counters from two sources can
    /// disagree by a clock tick).
    pub fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            system_s: (self.system_s - earlier.system_s).max(0.0),
        }
    }
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of `/proc` stat times.
pub fn clock_ticks() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *TICKS.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        t if t > 0 => t as f64,
        _ => 100.0,
    })
}

/// Bytes per memory page (`sysconf(_SC_PAGESIZE)`).
pub fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as u64,
        _ => 4096,
    })
}

fn rusage(who: libc::c_int) -> CpuTimes {
    // SAFETY: an all-zero rusage is valid; getrusage only writes into it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(who, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    CpuTimes {
        user_s: s(ru.ru_utime),
        system_s: s(ru.ru_stime),
    }
}

/// This process, every thread included (microsecond resolution).
pub fn self_times() -> CpuTimes {
    rusage(libc::RUSAGE_SELF)
}

/// The calling thread.
pub fn this_thread_times() -> CpuTimes {
    rusage(libc::RUSAGE_THREAD)
}

/// What one `stat` line holds that the runner uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    pub times: CpuTimes,
    /// Children it has waited for (fields 16 and 17: `cutime`, `cstime`).
    pub children_times: CpuTimes,
    /// Resident set size now.
    pub rss_bytes: u64,
}

/// Parse a `/proc/.../stat` line: fields 14 to 17 (utime, stime, cutime,
/// cstime, in `ticks` per second) and 24 (rss, in pages). The command name (field 2)
/// may hold spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat(line: &str, ticks: f64, page: u64) -> Result<Stat, String> {
    let rest = line
        .rfind(')')
        .map(|i| &line[i + 1..])
        .ok_or_else(|| "expected `pid (comm) state ...`, found no `)`".to_string())?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // fields[0] is field 3 (state).
    let field = |n: usize| -> Result<u64, String> {
        let f = fields
            .get(n - 3)
            .ok_or_else(|| format!("expected at least {n} fields, found {}", fields.len() + 2))?;
        f.parse::<u64>()
            .map_err(|_| format!("field {n}: expected a whole number, found {f:?}"))
    };
    Ok(Stat {
        times: CpuTimes {
            user_s: field(14)? as f64 / ticks,
            system_s: field(15)? as f64 / ticks,
        },
        children_times: CpuTimes {
            user_s: field(16)? as f64 / ticks,
            system_s: field(17)? as f64 / ticks,
        },
        rss_bytes: field(24)? * page,
    })
}

fn read_stat(path: &str) -> Option<Stat> {
    let line = std::fs::read_to_string(path).ok()?;
    parse_stat(&line, clock_ticks(), page_size()).ok()
}

/// Another process (a worker), from `/proc/PID/stat`.
pub fn process_stat(pid: u32) -> Option<Stat> {
    read_stat(&format!("/proc/{pid}/stat"))
}

/// A thread of this process, from `/proc/self/task/TID/stat`.
pub fn thread_stat(tid: u32) -> Option<Stat> {
    read_stat(&format!("/proc/self/task/{tid}/stat"))
}

/// The children of process `pid` (every thread's `children` list).
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut kids: Vec<u32> = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| {
            text.split_ascii_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    kids.sort_unstable();
    kids.dedup();
    kids
}

/// `pid` and all its descendants, parents before children.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() && all.len() < 4096 {
        let kids = children(all[i]);
        all.extend(
            kids.into_iter()
                .filter(|k| !all.contains(k))
                .collect::<Vec<_>>(),
        );
        i += 1;
    }
    all
}

/// This process's resident set size now (`/proc/self/statm`, second field).
pub fn self_rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

/// Parse a `kB` line such as `VmHWM:   1234 kB` of `/proc/PID/status`.
pub fn status_kb(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// Restart a process's `VmHWM` from its current RSS (`clear_refs` 5, as
/// for the runner itself); false where the kernel refuses.
pub fn reset_peak_rss(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// A process's peak resident set size (`VmHWM`).
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    status_kb(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?,
        "VmHWM",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_loader::Rng;

    /// A stat line as the kernel writes it, for a command name `comm`.
    fn line(pid: u32, comm: &str, utime: u64, stime: u64, rss: u64) -> String {
        let mut f: Vec<String> = (3..=52).map(|n| (n * 7).to_string()).collect();
        f[16 - 3] = (utime / 3).to_string();
        f[17 - 3] = (stime / 5).to_string();
        f[0] = "S".into();
        f[14 - 3] = utime.to_string();
        f[15 - 3] = stime.to_string();
        f[24 - 3] = rss.to_string();
        format!("{pid} ({comm}) {}\n", f.join(" "))
    }

    #[test]
    fn stat_lines_parse_whatever_the_command_name_holds() {
        let mut rng = Rng::new(12);
        let alphabet: Vec<char> = "ab )(x 9-".chars().collect();
        for _ in 0..500 {
            let comm: String = (0..rng.below(16))
                .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                .collect();
            let (u, s, r) = (rng.below(1 << 40), rng.below(1 << 40), rng.below(1 << 30));
            let ticks = [100.0, 250.0, 1000.0][rng.below(3) as usize];
            let st = parse_stat(
                &line(rng.below(1 << 22) as u32, &comm, u, s, r),
                ticks,
                4096,
            )
            .unwrap_or_else(|e| panic!("comm {comm:?}: {e}"));
            assert_eq!(st.times.user_s, u as f64 / ticks, "comm {comm:?}");
            assert_eq!(st.times.system_s, s as f64 / ticks);
            assert_eq!(st.children_times.user_s, (u / 3) as f64 / ticks);
            assert_eq!(st.children_times.system_s, (s / 5) as f64 / ticks);
            assert_eq!(st.rss_bytes, r * 4096);
        }
    }

    #[test]
    fn a_short_or_broken_stat_line_says_what_was_expected() {
        let e = parse_stat("12 (x) S 1 2 3", 100.0, 4096).unwrap_err();
        assert!(e.contains("expected at least 14 fields"), "{e}");
        let e = parse_stat("12 x S", 100.0, 4096).unwrap_err();
        assert!(e.contains("no `)`"), "{e}");
        let bad = line(1, "x", 5, 6, 7).replace(" 5 6 ", " 5 six ");
        let e = parse_stat(&bad, 100.0, 4096).unwrap_err();
        assert!(e.contains("field 15") && e.contains("\"six\""), "{e}");
    }

    #[test]
    fn this_process_reads_back_through_every_reader() {
        let me = process_stat(std::process::id()).unwrap();
        assert!(me.rss_bytes > 1 << 20);
        assert!(self_rss_bytes().unwrap() > 1 << 20);
        assert!(peak_rss_bytes(std::process::id()).unwrap() >= 1 << 20);
        let tid = stallscope_loader::current_tid();
        assert!(thread_stat(tid).is_some());
        assert!(thread_stat(u32::MAX).is_none());
        assert!(self_times().total() >= this_thread_times().total() - 1e-3);
        assert_eq!(
            status_kb("VmHWM:\t  12 kB\nVmRSS: 3 kB\n", "VmRSS"),
            Some(3072)
        );
        assert_eq!(status_kb("VmHWMx: 12 kB\n", "VmHWM"), None);
    }
}
