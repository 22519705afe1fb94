//! Semantic checks of the format 1.3 fields: a merged configuration's
//! per-rank columns (one entry per rank, ranks listed in the bundle, shares
//! in 0..=1 summing to 1, straggler counts within the steps compared), its
//! sidecar files named once each, and its job runs (pooling every rank,
//! their slowest rank one of them, no rank of their own).

use std::collections::HashSet;

use super::Validator;
use crate::format::*;

/// Shares are written to 1e-6: four of them sum to 1 within this.
const SHARE_SUM_TOLERANCE: f64 = 1e-4;

impl Validator {
    /// `Configuration.ranks` and the job runs beside it.
    pub(super) fn rank_columns(&mut self, c: &Configuration, path: &str) {
        let Some(cols) = &c.ranks else {
            for (k, r) in c.runs.iter().enumerate() {
                if r.job.is_some() {
                    self.push(
                        format!("{path}.runs[{k}].job"),
                        "a job run in a configuration without rank columns",
                        "job runs only beside `ranks` (format 1.3 merged bundles)",
                    );
                }
            }
            return;
        };
        for (k, r) in c.runs.iter().enumerate() {
            self.job_run(r, cols.world, &format!("{path}.runs[{k}]"));
        }
        let path = format!("{path}.ranks");
        self.column_lengths(cols, &path);
        self.column_ranks(cols, &path);
        self.column_shares(cols, &path);
        self.sidecars(&cols.sidecars, &path);
    }

    fn column_lengths(&mut self, cols: &RankColumns, path: &str) {
        let n = cols.rank.len();
        let lens = [
            ("steps", cols.steps.len()),
            ("step_median_s", cols.step_median_s.len()),
            ("next_wait_share", cols.next_wait_share.len()),
            ("transfer_share", cols.transfer_share.len()),
            ("compute_share", cols.compute_share.len()),
            ("comm_share", cols.comm_share.len()),
            ("straggler_steps", cols.straggler_steps.len()),
            ("samples_per_s", cols.samples_per_s.len()),
        ];
        for (name, len) in lens {
            if len != n {
                self.push(
                    format!("{path}.{name}"),
                    format!("{len} entries for {n} ranks"),
                    "one entry per rank of `rank`",
                );
            }
        }
        if n as u64 > u64::from(cols.world) {
            self.push(
                format!("{path}.rank"),
                format!("{n} ranks in a world of {}", cols.world),
                "at most `world` ranks",
            );
        }
    }

    fn column_ranks(&mut self, cols: &RankColumns, path: &str) {
        for (i, w) in cols.rank.windows(2).enumerate() {
            if w[0] >= w[1] {
                self.push(
                    format!("{path}.rank[{}]", i + 1),
                    format!("rank {} after rank {}", w[1], w[0]),
                    "ranks ascending, each once",
                );
            }
        }
        if let Some(listed) = &self.ranks {
            let missing: Vec<String> = cols
                .rank
                .iter()
                .enumerate()
                .filter(|(_, r)| !listed.contains(r))
                .take(3)
                .map(|(i, r)| format!("rank[{i}] = {r}"))
                .collect();
            if !missing.is_empty() {
                self.push(
                    format!("{path}.rank"),
                    format!("{} not in the bundle's `ranks`", missing.join(", ")),
                    "ranks the merged bundle lists",
                );
            }
        }
        for (i, &s) in cols.straggler_steps.iter().enumerate() {
            if s > cols.steps_compared {
                self.push(
                    format!("{path}.straggler_steps[{i}]"),
                    format!("{s} steps of {} compared", cols.steps_compared),
                    "at most `steps_compared`",
                );
            }
        }
    }

    fn column_shares(&mut self, cols: &RankColumns, path: &str) {
        let columns = [
            ("next_wait_share", &cols.next_wait_share),
            ("transfer_share", &cols.transfer_share),
            ("compute_share", &cols.compute_share),
            ("comm_share", &cols.comm_share),
        ];
        for (name, col) in columns {
            for (i, v) in col.iter().enumerate() {
                if let Some(v) = v
                    && !(v.is_finite() && (0.0..=1.0).contains(v))
                {
                    self.push(
                        format!("{path}.{name}[{i}]"),
                        format!("found {v}"),
                        "a share in 0..=1",
                    );
                }
            }
        }
        for i in 0..cols.rank.len() {
            let parts: Option<Vec<f64>> = columns
                .iter()
                .map(|(_, c)| c.get(i).copied().flatten())
                .collect();
            if let Some(sum) = parts.map(|p| p.iter().sum::<f64>())
                && (sum - 1.0).abs() > SHARE_SUM_TOLERANCE
            {
                self.push(
                    format!("{path}.next_wait_share[{i}]"),
                    format!("rank {}'s four shares sum to {sum}", cols.rank[i]),
                    "shares of the step summing to 1",
                );
            }
        }
        for (name, col) in [
            ("step_median_s", &cols.step_median_s),
            ("samples_per_s", &cols.samples_per_s),
        ] {
            for (i, v) in col.iter().enumerate() {
                if let Some(v) = v
                    && !(v.is_finite() && *v >= 0.0)
                {
                    self.push(
                        format!("{path}.{name}[{i}]"),
                        format!("found {v}"),
                        "a finite value ≥ 0",
                    );
                }
            }
        }
    }

    fn sidecars(&mut self, sidecars: &[RankSidecar], path: &str) {
        let mut stages = HashSet::new();
        for (i, s) in sidecars.iter().enumerate() {
            let p = format!("{path}.sidecars[{i}]");
            if !crate::merge::STAGES.contains(&s.stage.as_str()) {
                self.push(
                    format!("{p}.stage"),
                    format!("stage {:?}", s.stage),
                    "next_wait, transfer, compute or comm",
                );
            } else if !stages.insert(s.stage.as_str()) {
                self.push(
                    format!("{p}.stage"),
                    format!("stage {:?} twice", s.stage),
                    "one file per stage",
                );
            }
            let plain = !s.file.is_empty()
                && !s.file.starts_with('.')
                && !s.file.contains(['/', '\\'])
                && s.file.ends_with(".ssrs");
            if !plain {
                self.push(
                    format!("{p}.file"),
                    format!("file {:?}", s.file),
                    "a plain file name ending .ssrs, in the bundle's folder",
                );
            }
            if s.fnv64.len() != 16 || !s.fnv64.bytes().all(|b| b.is_ascii_hexdigit()) {
                self.push(
                    format!("{p}.fnv64"),
                    format!("found {:?}", s.fnv64),
                    "16 hex digits",
                );
            }
        }
    }

    fn job_run(&mut self, r: &Run, world: u32, path: &str) {
        let Some(job) = &r.job else { return };
        if r.rank.is_some() {
            self.push(
                format!("{path}.rank"),
                "a job run with a rank",
                "no rank: a job run pools every rank",
            );
        }
        if job.ranks != world {
            self.push(
                format!("{path}.job.ranks"),
                format!("{} ranks pooled in a world of {world}", job.ranks),
                "every rank of the world",
            );
        }
        if job.slowest_rank >= world {
            self.push(
                format!("{path}.job.slowest_rank"),
                format!("rank {} in a world of {world}", job.slowest_rank),
                "a rank below the world size",
            );
        }
    }
}
