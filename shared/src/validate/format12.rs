//! Semantic checks of the format 1.2 fields: ranks of a merged bundle and
//! each process's rank layout, the comm series, a run's CPU cost, its
//! sampled timeline and a comm-timeout failure.

use std::collections::HashSet;

use super::{MEASURED_RATE_TOLERANCE, PUBLISHED_RATE_TOLERANCE, Validator};
use crate::format::*;

impl Validator {
    /// `Bundle.ranks`: unique, ascending, each its layout's rank, one world.
    pub(super) fn ranks(&mut self, ranks: &[RankHost]) {
        let mut seen = HashSet::new();
        let world = ranks.first().map(|r| r.layout.world_size);
        for (i, r) in ranks.iter().enumerate() {
            let path = format!("$.ranks[{i}]");
            if !seen.insert(r.rank) {
                self.push(
                    format!("{path}.rank"),
                    format!("rank {} is listed twice", r.rank),
                    "every rank of a merged bundle once",
                );
            } else if i > 0 && ranks[i - 1].rank > r.rank {
                self.push(
                    format!("{path}.rank"),
                    format!("rank {} follows rank {}", r.rank, ranks[i - 1].rank),
                    "the ranks in ascending order",
                );
            }
            if r.layout.rank != r.rank {
                self.push(
                    format!("{path}.layout.rank"),
                    format!("the layout says rank {} for rank {}", r.layout.rank, r.rank),
                    "the rank its layout names",
                );
            }
            if Some(r.layout.world_size) != world {
                self.push(
                    format!("{path}.layout.world_size"),
                    format!(
                        "world size {} where rank {} has {}",
                        r.layout.world_size,
                        ranks[0].rank,
                        world.unwrap_or_default()
                    ),
                    "one world size for every rank of the run",
                );
            }
            self.rank_layout(&r.layout, &format!("{path}.layout"));
        }
        if let Some(w) = world
            && self.complete
            && ranks.len() as u64 != u64::from(w)
        {
            self.push(
                "$.ranks",
                format!("{} ranks of a world of {w}", ranks.len()),
                "every rank of the world in a complete merged bundle",
            );
        }
    }

    /// One process's layout: its rank within the world, local rank within
    /// the node's.
    pub(super) fn rank_layout(&mut self, l: &RankLayout, path: &str) {
        if l.world_size == 0 || l.rank >= l.world_size {
            self.push(
                format!("{path}.rank"),
                format!("rank {} of a world of {}", l.rank, l.world_size),
                "a rank below the world size",
            );
        }
        if let Some(n) = l.local_world_size
            && (n == 0 || l.local_rank >= n || n > l.world_size)
        {
            self.push(
                format!("{path}.local_rank"),
                format!(
                    "local rank {} of {n} on the node, world {}",
                    l.local_rank, l.world_size
                ),
                "a local rank below the node's process count, which is at most the world size",
            );
        }
        if l.sync.trim().is_empty() {
            self.push(
                format!("{path}.sync"),
                "the synchronisation is not named",
                "how the ranks synchronised each step, e.g. \"tcpstore_barrier\"",
            );
        }
        if let Some(t) = l.timeout_s
            && !(t.is_finite() && t > 0.0)
        {
            self.push(
                format!("{path}.timeout_s"),
                format!("found {t}"),
                "a finite, positive number of seconds",
            );
        }
    }

    /// `Run.rank` only in a merged bundle that lists that rank.
    pub(super) fn run_rank(&mut self, rank: Option<u32>, path: &str) {
        let Some(r) = rank else { return };
        match &self.ranks {
            None => self.push(
                format!("{path}.rank"),
                format!("rank {r} in a bundle that lists no ranks"),
                "a run's rank only in a merged bundle whose `ranks` lists it",
            ),
            Some(listed) if !listed.contains(&r) => self.push(
                format!("{path}.rank"),
                format!("rank {r} is not in the bundle's `ranks`"),
                "one of the ranks the merged bundle lists",
            ),
            Some(_) => {}
        }
    }

    /// The comm column: empty (one process) or one entry per step.
    pub(super) fn comm_series(&mut self, s: &StepSeries, path: &str) {
        let n = s.next_wait_ns.len();
        if !s.comm_ns.is_empty() && s.comm_ns.len() != n {
            self.push(
                format!("{path}.comm_ns"),
                format!("{} entries for {n} steps", s.comm_ns.len()),
                "no entry (one process) or one per step, as the other columns",
            );
        }
    }

    /// Finite, non-negative CPU seconds; the per-1,000-samples figure equal
    /// to `cpu_s` ÷ the run's samples × 1,000.
    pub(super) fn cost(&mut self, c: &CpuCost, samples: Option<u64>, path: &str) {
        self.non_negative(
            c.wall_s,
            format!("{path}.wall_s"),
            "the wall seconds covered",
        );
        self.non_negative(c.cpu_s, format!("{path}.cpu_s"), "the CPU-seconds");
        if let Some(v) = c.cpu_s_per_1000_samples {
            self.non_negative(
                v,
                format!("{path}.cpu_s_per_1000_samples"),
                "the CPU-seconds per 1,000 samples",
            );
            if let Some(n) = samples.filter(|n| *n > 0)
                && v.is_finite()
                && c.cpu_s.is_finite()
            {
                let expect = c.cpu_s / n as f64 * 1000.0;
                let tol = if self.measured {
                    MEASURED_RATE_TOLERANCE
                } else {
                    PUBLISHED_RATE_TOLERANCE
                };
                if (v - expect).abs() > tol * expect.abs().max(f64::MIN_POSITIVE) {
                    self.push(
                        format!("{path}.cpu_s_per_1000_samples"),
                        format!(
                            "found {v}, but cpu_s ÷ samples × 1,000 = {} ÷ {n} × 1,000 = {expect:.6}",
                            c.cpu_s
                        ),
                        format!("cpu_s ÷ the run's samples × 1,000 (within {}%)", tol * 100.0),
                    );
                }
            }
        }
        for (i, p) in c.parts.iter().enumerate() {
            let ppath = format!("{path}.parts[{i}]");
            self.non_negative(p.user_s, format!("{ppath}.user_s"), "the user CPU-seconds");
            self.non_negative(
                p.system_s,
                format!("{ppath}.system_s"),
                "the system CPU-seconds",
            );
            if p.kind == CpuPartKind::Thread && p.peak_rss_bytes.is_some() {
                self.push(
                    format!("{ppath}.peak_rss_bytes"),
                    "a thread with a peak RSS",
                    "a peak RSS only for processes (threads share the runner's memory)",
                );
            }
        }
    }

    fn non_negative(&mut self, v: f64, path: String, what: &str) {
        if !v.is_finite() || v < 0.0 {
            self.push(
                path,
                format!("found {v}"),
                format!("{what}: a finite, non-negative number"),
            );
        }
    }

    /// Every series of `t_ms`'s length; times and steps non-decreasing.
    pub(super) fn timeline(&mut self, t: &Timeline, path: &str) {
        if !(t.interval_s.is_finite() && t.interval_s > 0.0) {
            self.push(
                format!("{path}.interval_s"),
                format!("found {}", t.interval_s),
                "a finite, positive interval in seconds",
            );
        }
        let n = t.t_ms.len();
        if let Some(i) = t.t_ms.windows(2).position(|w| w[1] < w[0]) {
            self.push(
                format!("{path}.t_ms[{}]", i + 1),
                format!("{} ms after {} ms", t.t_ms[i + 1], t.t_ms[i]),
                "sample times that never go back",
            );
        }
        let mut length = |name: &str, len: usize, required: bool| {
            if len != n && (required || len > 0) {
                self.push(
                    format!("{path}.{name}"),
                    format!("{len} samples where t_ms has {n}"),
                    "one entry per sample time",
                );
            }
        };
        length("steps", t.steps.len(), false);
        length("host_cpu_cores", t.host_cpu_cores.len(), true);
        length("host_rss_bytes", t.host_rss_bytes.len(), true);
        if let Some(i) = t.steps.windows(2).position(|w| w[1] < w[0]) {
            self.push(
                format!("{path}.steps[{}]", i + 1),
                format!("{} steps after {}", t.steps[i + 1], t.steps[i]),
                "steps finished that never go back",
            );
        }
        if let Some(i) = t
            .host_cpu_cores
            .iter()
            .position(|c| !c.is_finite() || *c < 0.0)
        {
            self.push(
                format!("{path}.host_cpu_cores[{i}]"),
                format!("found {}", t.host_cpu_cores[i]),
                "a finite, non-negative number of cores",
            );
        }
        let Some(g) = &t.gpu else { return };
        let gpath = format!("{path}.gpu");
        let series = [
            ("utilization_percent", g.utilization_percent.len()),
            ("memory_used_bytes", g.memory_used_bytes.len()),
            ("sm_clock_mhz", g.sm_clock_mhz.len()),
            ("pcie_rx_bytes_per_s", g.pcie_rx_bytes_per_s.len()),
            ("pcie_tx_bytes_per_s", g.pcie_tx_bytes_per_s.len()),
            ("allocated_bytes", g.allocated_bytes.len()),
            ("reserved_bytes", g.reserved_bytes.len()),
        ];
        if n > 0 && series.iter().all(|(_, len)| *len == 0) {
            self.push(
                gpath.clone(),
                "GPU counters without a single series",
                "at least one GPU series, or `gpu_not_available` with the reason instead",
            );
        }
        for (name, len) in series {
            if len > 0 && len != n {
                self.push(
                    format!("{gpath}.{name}"),
                    format!("{len} samples where t_ms has {n}"),
                    "one entry per sample time (or none when NVML could not read it)",
                );
            }
        }
        if let Some(i) = g.utilization_percent.iter().position(|u| *u > 100) {
            self.push(
                format!("{gpath}.utilization_percent[{i}]"),
                format!("found {}", g.utilization_percent[i]),
                "a percentage from 0 to 100",
            );
        }
    }

    /// A comm timeout names its operation; its ranks are the bundle's.
    pub(super) fn comm_timeout(&mut self, f: &Failure, path: &str) {
        let Failure::CommTimeout {
            operation,
            timeout_s,
            missing_ranks,
            ..
        } = f
        else {
            return;
        };
        if operation.trim().is_empty() {
            self.push(
                format!("{path}.operation"),
                "the operation is empty",
                "what timed out, e.g. \"barrier at step 41 of epoch 1\"",
            );
        }
        if let Some(t) = timeout_s
            && !(t.is_finite() && *t > 0.0)
        {
            self.push(
                format!("{path}.timeout_s"),
                format!("found {t}"),
                "a finite, positive number of seconds",
            );
        }
        if let Some(listed) = &self.ranks
            && let Some(r) = missing_ranks.iter().find(|r| !listed.contains(r))
        {
            self.push(
                format!("{path}.missing_ranks"),
                format!("rank {r} is not in the bundle's `ranks`"),
                "ranks the merged bundle lists",
            );
        }
    }
}
