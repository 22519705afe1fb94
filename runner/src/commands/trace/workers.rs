//! The worker tracks of a trace: one track (tid) per loader worker, named
//! `worker N (thread|process)`, with a slice per batch it built and, inside,
//! a slice per sample with its stages laid end to end from the sample's
//! start (the loader keeps each stage's duration) and the batch's collate at
//! its end; the consumer's copies out of shared memory on a track of their
//! own; and a flow arrow from each batch to the next-wait of the step that
//! took it, whose args name the batch, its worker and its samples.

use std::collections::HashMap;

use serde_json::{Value, json};
use stallscope_bundle::WorkerTracks;

/// Worker `w`'s track is `WORKER_TID + w`.
const WORKER_TID: u64 = 100;
/// The consumer's handover track (worker processes only).
const HANDOVER_TID: u64 = 99;
/// The loop's next-wait track (see `STAGES`).
const NEXT_WAIT_TID: u64 = 1;

/// A run's worker tracks with their rows indexed.
pub(super) struct Tracks<'a> {
    t: &'a WorkerTracks,
    /// Batch index → its row in `batches`.
    row: HashMap<u64, usize>,
    /// Each batch row's first row in `samples`.
    first_sample_row: Vec<usize>,
    /// Batch index → the step that took it.
    step: HashMap<u64, usize>,
}

impl<'a> Tracks<'a> {
    pub(super) fn new(t: &'a WorkerTracks) -> Self {
        let b = &t.batches;
        let first_sample_row = (b.sample_rows.iter())
            .scan(0usize, |at, &n| {
                let first = *at;
                *at += n as usize;
                Some(first)
            })
            .collect();
        Tracks {
            t,
            row: b.batch.iter().enumerate().map(|(k, &x)| (x, k)).collect(),
            first_sample_row,
            step: t
                .steps
                .batch
                .iter()
                .enumerate()
                .map(|(i, &x)| (x, i))
                .collect(),
        }
    }

    /// Where step `i`'s next-wait starts on the loader's clock: it ends when
    /// the loader handed the step its batch, and not before the previous
    /// step ended (`after`).
    pub(super) fn step_start(&self, i: usize, after: u64, wait: u64) -> u64 {
        match self.t.steps.delivered_ns.get(i) {
            Some(&d) => d.saturating_sub(wait).max(after),
            None => after,
        }
    }

    /// The batch step `i` took, with its worker and samples, into `args`.
    pub(super) fn step_args(&self, i: usize, args: &mut Value) {
        let Some(&batch) = self.t.steps.batch.get(i) else {
            return;
        };
        args["batch"] = batch.into();
        let Some(&k) = self.row.get(&batch) else {
            return;
        };
        args["worker"] = self.t.batches.worker[k].into();
        args["samples"] = self.samples_of(k);
    }

    /// The flow arrow's end at step `i`'s next-wait, which starts at `ts`.
    pub(super) fn flow_end(&self, args: &Value, ts: u64) -> Option<Value> {
        let batch = args["batch"].as_u64()?;
        args.get("worker")?;
        Some(json!({
            "ph": "f", "bp": "e", "name": "batch", "cat": "batch", "id": batch,
            "pid": 1, "tid": NEXT_WAIT_TID, "ts": us(ts)
        }))
    }

    /// The batch's sample indices, or its first sample and count when its
    /// samples were past the cap.
    fn samples_of(&self, k: usize) -> Value {
        let b = &self.t.batches;
        let n = b.sample_rows[k] as usize;
        if n == 0 {
            return json!({ "first": b.first_sample[k], "count": b.samples[k] });
        }
        let first = self.first_sample_row[k];
        json!(self.t.samples.index.get(first..first + n).unwrap_or(&[]))
    }

    /// The tracks' names, then every worker's and the handover's slices.
    pub(super) fn events(&self) -> Vec<Value> {
        let t = self.t;
        let kind = if t.kind == "threads" {
            "thread"
        } else {
            "process"
        };
        let mut events = Vec::new();
        for w in 0..t.workers as u64 {
            events.push(thread_name(WORKER_TID + w, &format!("worker {w} ({kind})")));
        }
        if !t.batches.handover_ns.is_empty() {
            events.push(thread_name(HANDOVER_TID, "handover (consumer thread)"));
        }
        for k in 0..t.batches.batch.len() {
            self.batch_events(k, &mut events);
        }
        events
    }

    fn batch_events(&self, k: usize, events: &mut Vec<Value>) {
        let b = &self.t.batches;
        let (batch, tid) = (b.batch[k], WORKER_TID + b.worker[k] as u64);
        let (start, build) = (b.start_ns[k], b.build_ns[k]);
        let mut args = json!({
            "batch": batch, "worker": b.worker[k], "samples": self.samples_of(k)
        });
        if let Some(step) = self.step.get(&batch) {
            args["step"] = (*step).into();
        }
        events.push(slice(
            &format!("batch {batch}"),
            "batch",
            tid,
            start,
            build,
            args,
        ));
        events.push(json!({
            "ph": "s", "name": "batch", "cat": "batch", "id": batch,
            "pid": 1, "tid": tid, "ts": us(start)
        }));
        let samples_end = self.sample_events(k, tid, events);
        let collate = b.collate_ns[k];
        if collate > 0 {
            let at = (start + build).saturating_sub(collate).max(samples_end);
            let dur = collate.min((start + build).saturating_sub(at));
            let args = json!({ "batch": batch });
            events.push(slice("collate", "stage", tid, at, dur, args));
        }
        if let (Some(&from), Some(&ns)) = (b.handover_start_ns.get(k), b.handover_ns.get(k)) {
            let name = format!("handover batch {batch}");
            let args = json!({ "batch": batch, "worker": b.worker[k] });
            events.push(slice(&name, "stage", HANDOVER_TID, from, ns, args));
        }
    }

    /// Batch row `k`'s samples and their stages; where the last one ended.
    fn sample_events(&self, k: usize, tid: u64, events: &mut Vec<Value>) -> u64 {
        let s = &self.t.samples;
        let first = self.first_sample_row[k];
        let mut end = self.t.batches.start_ns[k];
        for row in first..first + self.t.batches.sample_rows[k] as usize {
            let (index, start) = (s.index[row], s.start_ns[row]);
            let bad = s.bad.contains(&(row as u32));
            let total: u64 = s.stages.iter().map(|st| st.ns[row]).sum();
            let name = if bad {
                format!("sample {index} (bad)")
            } else {
                format!("sample {index}")
            };
            let args = json!({ "sample": index, "batch": self.t.batches.batch[k], "bad": bad });
            events.push(slice(&name, "sample", tid, start, total, args));
            let mut at = start;
            for st in s.stages.iter().filter(|st| st.ns[row] > 0) {
                let args = json!({ "sample": index });
                events.push(slice(&st.name, "stage", tid, at, st.ns[row], args));
                at += st.ns[row];
            }
            end = end.max(start + total);
        }
        end
    }
}

fn thread_name(tid: u64, name: &str) -> Value {
    json!({ "ph": "M", "name": "thread_name", "pid": 1, "tid": tid, "args": { "name": name } })
}

fn slice(name: &str, cat: &str, tid: u64, start: u64, dur: u64, args: Value) -> Value {
    json!({
        "ph": "X", "name": name, "cat": cat, "pid": 1, "tid": tid,
        "ts": us(start), "dur": us(dur), "args": args
    })
}

/// Nanoseconds as the trace's microseconds.
pub(super) fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}
