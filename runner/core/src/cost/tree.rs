//! CPU accounting of a process tree the runner only watches from outside:
//! the peer engine's Python harness and its descendants (DataLoader worker
//! processes). Per live process `utime + stime + cutime + cstime`: a child
//! the harness has reaped moves into its parent's `cutime`, so the sum over
//! the tree never loses an ended worker and never counts one twice.

use std::time::Instant;

use stallscope_bundle::{CpuCost, CpuPart, CpuPartKind};

use super::proc::{self, CpuTimes};

/// One process of the tree at a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeProcess {
    pub pid: u32,
    /// Its own time plus its reaped children's.
    pub times: CpuTimes,
    pub peak_rss_bytes: Option<u64>,
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
                    times: CpuTimes {
                        user_s: st.times.user_s + st.children_times.user_s,
                        system_s: st.times.system_s + st.children_times.system_s,
                    },
                    peak_rss_bytes: proc::peak_rss_bytes(pid),
                })
            })
            .collect();
        TreeSnapshot {
            at: Instant::now(),
            processes,
        }
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
                .and_then(|e| e.processes.iter().find(|p| p.pid == pid))
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
/// is alive at `after` is a part of its own (counting from zero when it is new).
pub fn tree_cost(
    before: &TreeSnapshot,
    after: &TreeSnapshot,
    samples: u64,
    root_name: &str,
) -> CpuCost {
    let mut parts = Vec::new();
    for (i, p) in after.processes.iter().enumerate() {
        let earlier = before
            .processes
            .iter()
            .find(|b| b.pid == p.pid)
            .map(|b| b.times)
            .unwrap_or_default();
        let used = p.times.since(earlier);
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
    // Children alive before and reaped since: their use up to `before` is
    // already in the parent's new cutime; take it out again.
    let gone: f64 = before
        .processes
        .iter()
        .skip(1)
        .filter(|b| after.processes.iter().all(|p| p.pid != b.pid))
        .map(|b| b.times.total())
        .sum();
    if let Some(root) = parts.first_mut() {
        let root_total = root.user_s + root.system_s;
        let keep = (root_total - gone).max(0.0);
        let scale = if root_total > 0.0 {
            keep / root_total
        } else {
            0.0
        };
        root.user_s *= scale;
        root.system_s *= scale;
    }
    let cpu_s: f64 = parts.iter().map(|p| p.user_s + p.system_s).sum();
    CpuCost {
        wall_s: after.at.saturating_duration_since(before.at).as_secs_f64(),
        cpu_s,
        cpu_s_per_1000_samples: (samples > 0).then(|| cpu_s / samples as f64 * 1000.0),
        parts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn p(pid: u32, total: f64) -> TreeProcess {
        TreeProcess {
            pid,
            times: CpuTimes {
                user_s: total,
                system_s: 0.0,
            },
            peak_rss_bytes: None,
        }
    }

    /// A generated life of a tree: children come, use CPU, are reaped into
    /// the root's cutime. The cost between any two snapshots equals the CPU
    /// the tree used in between, whatever ended in between.
    #[test]
    fn the_tree_total_survives_children_ending() {
        let mut rng = stallscope_loader::Rng::new(5);
        for case in 0..300 {
            let t0 = Instant::now();
            let mut root_own = 1.0;
            let mut root_reaped = 0.0;
            let mut kids: Vec<(u32, f64)> =
                (0..rng.below(4)).map(|i| (10 + i as u32, 0.5)).collect();
            let snap = |root_own: f64, root_reaped: f64, kids: &[(u32, f64)], ms| TreeSnapshot {
                at: t0 + Duration::from_millis(ms),
                processes: std::iter::once(p(1, root_own + root_reaped))
                    .chain(kids.iter().map(|&(pid, t)| p(pid, t)))
                    .collect(),
            };
            let before = snap(root_own, root_reaped, &kids, 0);
            let mut used = 0.0;
            let own = rng.below(100) as f64 / 10.0;
            root_own += own;
            used += own;
            for k in kids.iter_mut() {
                let more = rng.below(100) as f64 / 10.0;
                k.1 += more;
                used += more;
            }
            // Some children end and are reaped; some new ones start.
            kids.retain(|&(_, t)| {
                let ends = rng.coin();
                if ends {
                    root_reaped += t;
                }
                !ends
            });
            for pid in 100..100 + rng.below(3) as u32 {
                let t = rng.below(50) as f64 / 10.0;
                kids.push((pid, t));
                used += t;
            }
            let after = snap(root_own, root_reaped, &kids, 1000);
            let c = tree_cost(&before, &after, 10, "harness");
            assert!(
                (c.cpu_s - used).abs() < 1e-9,
                "case {case}: {} vs {used}",
                c.cpu_s
            );
            assert_eq!(c.parts[0].name, "harness");
            assert_eq!(c.parts.len(), kids.len() + 1);
            assert!(c.parts.iter().all(|p| p.user_s >= 0.0));
        }
    }

    #[test]
    fn a_real_child_is_found_and_counted() {
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .unwrap();
        let me = std::process::id();
        let before = TreeSnapshot::take(me);
        assert!(before.processes.iter().any(|p| p.pid == child.id()));
        std::thread::sleep(Duration::from_millis(300));
        let after = TreeSnapshot::take(me);
        let _ = child.kill();
        let _ = child.wait();
        let c = tree_cost(&before, &after, 0, "test");
        assert!(
            c.parts
                .iter()
                .any(|p| p.name.contains(&child.id().to_string()))
        );
        assert!(c.cpu_s >= 0.0 && c.cpu_s_per_1000_samples.is_none());
    }

    /// Over generated trees where some descendants have no readable peak
    /// now (zombies, or ending as read), some of those known from the
    /// earlier snapshot: the figure is the sum of the readable ones and the
    /// known ones, never voided by one that is neither; with none, the
    /// reaped figure.
    #[test]
    fn an_unreadable_worker_does_not_void_the_others_memory() {
        let mut rng = stallscope_loader::Rng::new(9);
        for case in 0..500 {
            let n = rng.below(6) as u32;
            let mut want = 0u64;
            let mut counted = 0;
            let (mut now, mut before) = (Vec::new(), Vec::new());
            for i in 0..=n {
                let peak = (i == 0 || rng.coin()).then(|| (1 + rng.below(1000)) << 20);
                let old = rng.coin().then(|| (1 + rng.below(1000)) << 20);
                if i > 0
                    && let Some(b) = peak.or(old)
                {
                    want += b;
                    counted += 1;
                }
                now.push(TreeProcess {
                    peak_rss_bytes: peak,
                    ..p(i + 1, 1.0)
                });
                before.push(TreeProcess {
                    peak_rss_bytes: old,
                    ..p(i + 1, 0.5)
                });
            }
            let at = Instant::now();
            let snap = TreeSnapshot { at, processes: now };
            let earlier = TreeSnapshot {
                at,
                processes: before,
            };
            let reaped = rng.coin().then_some(7 << 20);
            let got = snap.descendants_peak_rss_bytes(Some(&earlier), reaped);
            if counted == 0 {
                assert_eq!(got, reaped, "case {case}");
            } else {
                assert_eq!(got, Some(want), "case {case}");
            }
        }
    }
}
