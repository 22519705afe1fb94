//! Semantic checks of a run's worker tracks (format 1.4): only in diagnostic
//! runs; each table's columns one entry per row; workers below the loader's
//! count; every batch listed once; the sample rows the batches claim are the
//! rows there are; every step's batch listed unless the cap left some out.

use std::collections::HashSet;

use super::Validator;
use crate::format::*;

impl Validator {
    /// `Run.worker_tracks`.
    pub(super) fn worker_tracks(&mut self, r: &Run, t: &WorkerTracks, path: &str) {
        if r.timing_mode != TimingMode::Diagnostic {
            self.push(
                path,
                format!("worker tracks in a {} run", r.timing_mode.as_str()),
                "worker tracks only in diagnostic runs (whole-run epochs record nothing inside)",
            );
        }
        if t.kind != "threads" && t.kind != "processes" {
            self.push(
                format!("{path}.kind"),
                format!("{:?}", t.kind),
                "\"threads\" or \"processes\"",
            );
        }
        let batches = &t.batches;
        let rows = batches.batch.len();
        self.same_lengths(
            &format!("{path}.batches"),
            "batch",
            &track_batch_columns(batches),
        );
        for (name, col) in [
            ("handover_start_ns", &batches.handover_start_ns),
            ("handover_ns", &batches.handover_ns),
        ] {
            if !col.is_empty() && col.len() != rows {
                self.push(
                    format!("{path}.batches.{name}"),
                    format!("{} entries for {rows} batches", col.len()),
                    "one entry per batch, or none (worker threads hand nothing over)",
                );
            }
        }
        self.track_workers(t, &format!("{path}.batches.worker"));
        self.track_batch_ids(&batches.batch, &format!("{path}.batches.batch"));
        self.track_collate(batches, &format!("{path}.batches.collate_ns"));
        self.track_samples(t, path);
        self.track_steps(t, &format!("{path}.steps"));
    }

    /// Every column of a table as long as its first, `first`.
    fn same_lengths(&mut self, path: &str, first: &str, cols: &[(&str, usize)]) {
        let rows = cols.first().map_or(0, |c| c.1);
        for &(name, len) in cols {
            if len != rows {
                self.push(
                    format!("{path}.{name}"),
                    format!("{len} entries for {rows} rows of `{first}`"),
                    "one entry per row in every column",
                );
            }
        }
    }

    fn track_workers(&mut self, t: &WorkerTracks, path: &str) {
        if let Some((k, w)) = t
            .batches
            .worker
            .iter()
            .enumerate()
            .find(|(_, w)| **w >= t.workers)
        {
            self.push(
                format!("{path}[{k}]"),
                format!("worker {w} of a loader with {} workers", t.workers),
                "a worker index below `workers`",
            );
        }
    }

    fn track_batch_ids(&mut self, ids: &[u64], path: &str) {
        let mut seen = HashSet::new();
        if let Some((k, b)) = ids.iter().enumerate().find(|(_, b)| !seen.insert(**b)) {
            self.push(
                format!("{path}[{k}]"),
                format!("batch {b} listed twice"),
                "each batch of the epoch once (one worker builds it)",
            );
        }
    }

    fn track_collate(&mut self, b: &TrackBatches, path: &str) {
        let over = (b.collate_ns.iter())
            .zip(&b.build_ns)
            .position(|(c, build)| c > build);
        if let Some(k) = over {
            self.push(
                format!("{path}[{k}]"),
                format!(
                    "collate {} ns in a build of {} ns",
                    b.collate_ns[k], b.build_ns[k]
                ),
                "collate within the batch's build",
            );
        }
    }

    fn track_samples(&mut self, t: &WorkerTracks, tracks: &str) {
        let path = &format!("{tracks}.samples");
        let s = &t.samples;
        let rows = s.index.len();
        self.same_lengths(
            path,
            "index",
            &[("index", rows), ("start_ns", s.start_ns.len())],
        );
        for (i, stage) in s.stages.iter().enumerate() {
            if stage.ns.len() != rows {
                self.push(
                    format!("{path}.stages[{i}].ns"),
                    format!(
                        "{} entries for {rows} sample rows ({})",
                        stage.ns.len(),
                        stage.name
                    ),
                    "one entry per sample row in every stage",
                );
            }
        }
        let claimed: u64 = t.batches.sample_rows.iter().map(|&n| n as u64).sum();
        if claimed != rows as u64 {
            self.push(
                format!("{path}.index"),
                format!("{rows} sample rows, the batches' `sample_rows` sum to {claimed}"),
                "as many sample rows as the batches claim",
            );
        }
        let over = (t.batches.sample_rows.iter())
            .zip(&t.batches.samples)
            .position(|(rows, samples)| rows > samples);
        if let Some(k) = over {
            self.push(
                format!("{tracks}.batches.sample_rows[{k}]"),
                "more sample rows than the batch has samples",
                "at most `samples` rows per batch",
            );
        }
        if let Some(&b) = s.bad.iter().find(|&&b| b as usize >= rows) {
            self.push(
                format!("{path}.bad"),
                format!("row {b} of {rows} sample rows"),
                "rows of the sample table",
            );
        }
    }

    fn track_steps(&mut self, t: &WorkerTracks, path: &str) {
        let s = &t.steps;
        let cols = [
            ("batch", s.batch.len()),
            ("delivered_ns", s.delivered_ns.len()),
        ];
        self.same_lengths(path, "batch", &cols);
        if t.batches_left_out > 0 {
            return;
        }
        let listed: HashSet<u64> = t.batches.batch.iter().copied().collect();
        if let Some((k, b)) = s
            .batch
            .iter()
            .enumerate()
            .find(|(_, b)| !listed.contains(b))
        {
            self.push(
                format!("{path}.batch[{k}]"),
                format!("step {k} took batch {b}, which no worker track lists"),
                "every step's batch among `batches` (none was left out)",
            );
        }
    }
}

fn track_batch_columns(b: &TrackBatches) -> [(&'static str, usize); 8] {
    [
        ("batch", b.batch.len()),
        ("worker", b.worker.len()),
        ("start_ns", b.start_ns.len()),
        ("build_ns", b.build_ns.len()),
        ("collate_ns", b.collate_ns.len()),
        ("samples", b.samples.len()),
        ("first_sample", b.first_sample.len()),
        ("sample_rows", b.sample_rows.len()),
    ]
}
