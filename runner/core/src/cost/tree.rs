//! CPU accounting of a process tree the runner only watches from outside:
//! the peer engine's Python harness and its descendants (DataLoader worker
//! processes). Each live process's own `utime + stime` is a part of its
//! own; a child its parent has reaped moves into the parent's `cutime +
//! cstime`, and what the tree reaped in a window, less what those children
//! had already used when the window began, is the part "processes that
//! ended in the window". So the sum over the tree never loses an ended
//! worker and never counts one twice, and a worker that ends just before
//! the snapshot (persistent workers shut down right after the mode's last
//! epoch line) is still counted as a worker, not as its parent.

use std::time::Instant;

use stallscope_bundle::{CpuCost, CpuPart, CpuPartKind};

use super::proc::{self, CpuTimes};

/// The name of the part holding the CPU of the processes that ended
/// between two snapshots (their own and their reaped children's).
pub const ENDED_PART: &str = "processes that ended in the window";

/// One process of the tree at a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeProcess {
    pub pid: u32,
    /// Its own time (`utime`, `stime`).
    pub own: CpuTimes,
    /// Its reaped children's (`cutime`, `cstime`).
    pub reaped: CpuTimes,
    pub peak_rss_bytes: Option<u64>,
}

impl TreeProcess {
    /// Its own time and its reaped children's.
    fn total(&self) -> CpuTimes {
        CpuTimes {
            user_s: self.own.user_s + self.reaped.user_s,
            system_s: self.own.system_s + self.reaped.system_s,
        }
    }
}

/// The tree under a root process at one moment (root first).
#[derive(Debug, Clone)]
pub struct TreeSnapshot {
    pub at: Instant,
    pub processes: Vec<TreeProcess>,
}

impl TreeSnapshot {
    /// Read `root` and its descendants now.
    pub fn take(root: u32) -> Self {
        let processes = proc::tree(root)
            .into_iter()
            .filter_map(|pid| {
                let st = proc::process_stat(pid)?;
                Some(TreeProcess {
                    pid,
                    own: st.times,
                    reaped: st.children_times,
                    peak_rss_bytes: proc::peak_rss_bytes(pid),
                })
            })
            .collect();
        TreeSnapshot {
            at: Instant::now(),
            processes,
        }
    }

    fn find(&self, pid: u32) -> Option<&TreeProcess> {
        self.processes.iter().find(|p| p.pid == pid)
    }

    /// The descendants' memory, as the native loader counts live workers:
    /// the sum of the peaks of those in the tree now. One whose peak cannot
    /// be read now (a zombie: persistent workers the harness shut down
    /// right after its epoch line, before the runner read it; or a process
    /// ending between the listing and the read) counts with its peak at
    /// `earlier` (the previous line's snapshot), else is left out rather
    /// than voiding the sum. With none at all, `reaped` (the harness's
    /// largest peak of a finished child).
    pub fn descendants_peak_rss_bytes(
        &self,
        earlier: Option<&TreeSnapshot>,
        reaped: Option<u64>,
    ) -> Option<u64> {
        let known = |pid: u32| {
            earlier
                .and_then(|e| e.find(pid))
                .and_then(|p| p.peak_rss_bytes)
        };
        let live: Vec<u64> = self
            .processes
            .iter()
            .skip(1)
            .filter_map(|p| p.peak_rss_bytes.or_else(|| known(p.pid)))
            .collect();
        if live.is_empty() {
            reaped
        } else {
            Some(live.iter().sum())
        }
    }
}

/// What the tree used between two snapshots, `samples` handed out in
/// between. The root is the part named `root_name`; each other process that
/// is alive at `after` is a part of its own (counting from zero when it is
/// new), with its own time only; the processes that ended in between are
/// the part [`ENDED_PART`], present whenever one did.
pub fn tree_cost(
    before: &TreeSnapshot,
    after: &TreeSnapshot,
    samples: u64,
    root_name: &str,
) -> CpuCost {
    let mut parts = Vec::new();
    for (i, p) in after.processes.iter().enumerate() {
        let earlier = before.find(p.pid).map(|b| b.own).unwrap_or_default();
        let used = p.own.since(earlier);
        parts.push(CpuPart {
            name: if i == 0 {
                root_name.to_string()
            } else {
                format!("child process (pid {})", p.pid)
            },
            kind: CpuPartKind::Process,
            user_s: used.user_s,
            system_s: used.system_s,
            peak_rss_bytes: p.peak_rss_bytes,
        });
    }
    parts.extend(ended(before, after));
    let cpu_s: f64 = parts.iter().map(|p| p.user_s + p.system_s).sum();
    CpuCost {
        wall_s: after.at.saturating_duration_since(before.at).as_secs_f64(),
        cpu_s,
        cpu_s_per_1000_samples: (samples > 0).then(|| cpu_s / samples as f64 * 1000.0),
        parts,
    }
}

/// The processes that ended between the snapshots, as one part: what the
/// live processes reaped in between, less what those of them seen at
/// `before` had used by then (counted in an earlier window). `None` when
/// none was seen to go and nothing was reaped. Never below zero: a process
/// no one reaps (re-parented out of the tree) takes its time with it.
fn ended(before: &TreeSnapshot, after: &TreeSnapshot) -> Option<CpuPart> {
    let mut reaped = CpuTimes::default();
    for p in &after.processes {
        let earlier = before.find(p.pid).map(|b| b.reaped).unwrap_or_default();
        let d = p.reaped.since(earlier);
        reaped.user_s += d.user_s;
        reaped.system_s += d.system_s;
    }
    let gone: Vec<&TreeProcess> = before
        .processes
        .iter()
        .filter(|b| after.find(b.pid).is_none())
        .collect();
    if gone.is_empty() && reaped.total() == 0.0 {
        return None;
    }
    let mut counted = CpuTimes::default();
    for b in &gone {
        counted.user_s += b.total().user_s;
        counted.system_s += b.total().system_s;
    }
    let used = reaped.since(counted);
    Some(CpuPart {
        name: ENDED_PART.to_string(),
        kind: CpuPartKind::Process,
        user_s: used.user_s,
        system_s: used.system_s,
        peak_rss_bytes: None,
    })
}

#[cfg(test)]
mod tests;
