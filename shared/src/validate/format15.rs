//! Semantic checks of the format 1.5 fields: the machine's limits, peak
//! memory's one meaning (a process's peak at least its close; the run's
//! peaks those of its processes), an experiment's noise floor recomputed
//! from its A/A pair's runs, a configuration's forecast recomputed from its
//! inputs and the limits, and the `would_not_fit` and `crashed` failures.

use std::collections::HashSet;

use super::Validator;
use crate::analysis::{NOISE_FLOOR, forecast as forecast_of, noise_floor_of};
use crate::format::*;

/// Relative tolerance of a figure recomputed by the same arithmetic.
pub(super) const RECOMPUTED: f64 = 1e-9;

pub(super) fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= RECOMPUTED * a.abs().max(b.abs()).max(1e-300)
}

impl Validator {
    /// `Environment.limits`: usable CPUs from affinity and quota, every
    /// figure with its source, free shared memory within its size.
    pub(super) fn limits(&mut self, l: &HostLimits) {
        let path = "$.environment.limits";
        if let Some(q) = l.cpu_quota_cores
            && !(q.is_finite() && q > 0.0)
        {
            self.push(
                format!("{path}.cpu_quota_cores"),
                format!("found {q}"),
                "a finite, positive number of cores (absent when no quota is in force)",
            );
        }
        let quota = l.cpu_quota_cores.filter(|q| q.is_finite() && *q > 0.0);
        let expect = [l.affinity_cpus, quota.map(|q| q.ceil().max(1.0) as u32)]
            .into_iter()
            .flatten()
            .min();
        if l.usable_cpus == 0 || expect.is_some_and(|e| e != l.usable_cpus) {
            self.push(
                format!("{path}.usable_cpus"),
                format!(
                    "found {} with affinity {:?} and a quota of {:?} cores",
                    l.usable_cpus, l.affinity_cpus, l.cpu_quota_cores
                ),
                "the smaller of the affinity count and the quota rounded up, at least 1",
            );
        }
        let sourced = [
            (
                "cpu_quota",
                l.cpu_quota_cores.is_some(),
                &l.cpu_quota_source,
            ),
            (
                "memory_limit",
                l.memory_limit_bytes.is_some(),
                &l.memory_limit_source,
            ),
        ];
        for (name, has, source) in sourced {
            let named = source.as_deref().is_some_and(|s| !s.trim().is_empty());
            if has != named {
                self.push(
                    format!("{path}.{name}_source"),
                    format!(
                        "the figure is {}, its source {}",
                        present(has),
                        present(named)
                    ),
                    "a source exactly when there is a figure (the file it was read from)",
                );
            }
        }
        if l.memory_limit_bytes == Some(0) {
            self.push(
                format!("{path}.memory_limit_bytes"),
                "found 0",
                "a positive number of bytes",
            );
        }
        if let (Some(free), Some(total)) = (l.shm_free_bytes, l.shm_total_bytes)
            && free > total
        {
            self.push(
                format!("{path}.shm_free_bytes"),
                format!("{free} free of {total}"),
                "free space at most the size of /dev/shm",
            );
        }
    }

    /// Peaks of one meaning: each process's at least its close, the main
    /// process's the run's, the workers' summed; worker ids once each.
    pub(super) fn process_peaks(&mut self, m: &Memory, path: &str) {
        let mut ids = HashSet::new();
        for (i, p) in m.processes.iter().enumerate() {
            let ppath = format!("{path}.processes[{i}]");
            if let (Some(peak), Some(rss)) = (p.peak_rss_bytes, p.rss_bytes)
                && peak < rss
            {
                self.push(
                    format!("{ppath}.peak_rss_bytes"),
                    format!("peak {peak} below the RSS {rss} at the window's close"),
                    "a peak within the window at least the RSS at its close",
                );
            }
            if p.role == "worker"
                && let Some(id) = p.worker_id
                && !ids.insert(id)
            {
                self.push(
                    format!("{ppath}.worker_id"),
                    format!("worker {id} is recorded twice"),
                    "each worker process once",
                );
            }
        }
        if self.pooled {
            return;
        }
        let main = m.processes.iter().find(|p| p.role == "main");
        if let (Some(run), Some(peak)) =
            (m.host_peak_rss_bytes, main.and_then(|p| p.peak_rss_bytes))
            && run != peak
        {
            self.push(
                format!("{path}.host_peak_rss_bytes"),
                format!("{run}, but the main process's peak is {peak}"),
                "the main process's peak within the window (one meaning of peak memory)",
            );
        }
        let workers: Vec<&ProcessMemory> =
            m.processes.iter().filter(|p| p.role == "worker").collect();
        let peaks: Option<u64> = workers.iter().map(|p| p.peak_rss_bytes).sum();
        if let (Some(run), Some(sum)) = (m.workers_peak_rss_bytes, peaks)
            && !workers.is_empty()
            && run != sum
        {
            self.push(
                format!("{path}.workers_peak_rss_bytes"),
                format!("{run}, but the workers' own peaks sum to {sum}"),
                "the sum of each worker's peak within the window (never their last value)",
            );
        }
    }

    /// A `would_not_fit` or `crashed` failure.
    pub(super) fn fit_failure(&mut self, f: &Failure, path: &str) {
        match f {
            Failure::WouldNotFit {
                needed_bytes,
                available_bytes,
                message,
                ..
            } => {
                if needed_bytes <= available_bytes {
                    self.push(
                        format!("{path}.needed_bytes"),
                        format!("needs {needed_bytes} of the {available_bytes} available"),
                        "more than is available (else it would fit)",
                    );
                }
                self.one_line(message, &format!("{path}.message"));
            }
            Failure::Crashed {
                signal, message, ..
            } => {
                if let Some(s) = signal
                    && !(1..=64).contains(s)
                {
                    self.push(
                        format!("{path}.signal"),
                        format!("found {s}"),
                        "a signal number from 1 to 64",
                    );
                }
                self.one_line(message, &format!("{path}.message"));
            }
            Failure::Script { message, .. } => {
                self.one_line(message, &format!("{path}.message"));
            }
            _ => {}
        }
    }

    fn one_line(&mut self, message: &str, path: &str) {
        if message.trim().is_empty() || message.contains('\n') {
            self.push(
                path,
                if message.trim().is_empty() {
                    "the message is empty".to_string()
                } else {
                    format!("{} lines", message.lines().count())
                },
                "one readable line (the whole text goes in `detail`)",
            );
        }
    }

    /// `Experiment.noise_floor`: the floor of its own ratios, those the
    /// ratios of its A/A pair's runs.
    pub(super) fn noise_floor(&mut self, e: &Experiment, path: &str) {
        let Some(f) = &e.noise_floor else { return };
        let path = format!("{path}.noise_floor");
        for id in [&f.a, &f.b] {
            if e.configuration(id).is_none() {
                self.push(
                    format!("{path}.a"),
                    format!("no configuration has the id {id:?}"),
                    "the ids of the experiment's A/A pair",
                );
                return;
            }
        }
        let Some(expect) = noise_floor_of(e, &f.a, &f.b) else {
            self.push(
                path,
                format!("a floor, but {} and {} share under two repeats", f.a, f.b),
                "a floor only from two or more repeats of the A/A pair",
            );
            return;
        };
        let lists = [
            ("rate_ratios", &f.rate_ratios, &expect.rate_ratios),
            ("cpu_ratios", &f.cpu_ratios, &expect.cpu_ratios),
        ];
        for (name, found, want) in lists {
            let agree =
                found.len() == want.len() && found.iter().zip(want).all(|(a, b)| same(*a, *b));
            if !agree {
                self.push(
                    format!("{path}.{name}"),
                    format!("found {found:?}, but the runs give {want:?}"),
                    format!("{} ÷ {} per repeat, recomputed from the runs", f.b, f.a),
                );
            }
        }
        let floors = [
            ("rate_floor", Some(f.rate_floor), Some(expect.rate_floor)),
            ("cpu_floor", f.cpu_floor, expect.cpu_floor),
        ];
        for (name, found, want) in floors {
            let agree = match (found, want) {
                (Some(a), Some(b)) => same(a, b),
                (a, b) => a == b,
            };
            if !agree {
                self.push(
                    format!("{path}.{name}"),
                    format!("found {found:?}, but the ratios give {want:?}"),
                    format!(
                        "the largest ratio or reciprocal less one, at least {}",
                        NOISE_FLOOR
                    ),
                );
            }
        }
    }

    /// `Configuration.forecast`: its inputs those of the configuration, its
    /// figures those its inputs and the machine's limits give.
    pub(super) fn forecast(&mut self, c: &Configuration, path: &str) {
        let Some(f) = &c.forecast else { return };
        let path = format!("{path}.forecast");
        self.forecast_inputs(c, &f.inputs, &path);
        let want = forecast_of(&f.inputs, self.limits.as_ref());
        let figures = [
            ("shm_in_flight", &f.shm_in_flight, &want.shm_in_flight),
            ("pinned", &f.pinned, &want.pinned),
            (
                "worker_epoch_end",
                &f.worker_epoch_end,
                &want.worker_epoch_end,
            ),
            (
                "worker_across_epochs",
                &f.worker_across_epochs,
                &want.worker_across_epochs,
            ),
            (
                "memory_epoch_end",
                &f.memory_epoch_end,
                &want.memory_epoch_end,
            ),
            (
                "memory_across_epochs",
                &f.memory_across_epochs,
                &want.memory_across_epochs,
            ),
        ];
        for (name, found, want) in figures {
            let key = |x: &Option<ForecastFigure>| x.as_ref().map(|x| (x.bytes, x.limit_bytes));
            if key(found) != key(want) {
                self.push(
                    format!("{path}.{name}"),
                    format!(
                        "found {:?} (bytes, limit), but its inputs give {:?}",
                        key(found),
                        key(want)
                    ),
                    "the figure its inputs and the environment's limits give (analysis::forecast)",
                );
            }
        }
        let growth_agrees = match (
            f.worker_growth_per_sample_bytes,
            want.worker_growth_per_sample_bytes,
        ) {
            (Some(a), Some(b)) => same(a, b),
            (a, b) => a == b,
        };
        if !growth_agrees {
            self.push(
                format!("{path}.worker_growth_per_sample_bytes"),
                format!(
                    "found {:?}, but its inputs give {:?}",
                    f.worker_growth_per_sample_bytes, want.worker_growth_per_sample_bytes
                ),
                "the workers' median USS growth per sample read in the window",
            );
        }
        if f.copy_on_read.is_some() != want.copy_on_read.is_some() {
            self.push(
                format!("{path}.copy_on_read"),
                format!(
                    "{} where its inputs say {}",
                    present(f.copy_on_read.is_some()),
                    present(want.copy_on_read.is_some())
                ),
                "copy-on-read named exactly when the growth is above the noise under fork",
            );
        }
        if f.fits != want.fits {
            self.push(
                format!("{path}.fits"),
                format!("found {:?}, but its figures give {:?}", f.fits, want.fits),
                "whether every figure with a limit fits it",
            );
        }
    }

    fn forecast_inputs(&mut self, c: &Configuration, i: &ForecastInputs, path: &str) {
        let int = |k: &str| match c.params.get(k) {
            Some(ParamValue::Int(n)) => Some(*n),
            _ => None,
        };
        let pairs = [
            (
                "workers",
                Some(i64::from(i.workers)),
                int("actual_num_workers"),
                "actual_num_workers",
            ),
            (
                "prefetch_factor",
                i.prefetch_factor.map(i64::from),
                int("actual_prefetch_factor"),
                "actual_prefetch_factor",
            ),
            (
                "batch_bytes",
                i.batch_bytes.and_then(|b| i64::try_from(b).ok()),
                c.batch_bytes.and_then(|b| i64::try_from(b).ok()),
                "batch_bytes",
            ),
        ];
        for (name, found, want, from) in pairs {
            if let (Some(a), Some(b)) = (found, want)
                && a != b
            {
                self.push(
                    format!("{path}.inputs.{name}"),
                    format!("found {a}, but the configuration's {from} is {b}"),
                    "the configuration's own figure",
                );
            }
        }
        let mut ids = HashSet::new();
        for (k, w) in i.workers_uss.iter().enumerate() {
            if w.worker_id >= i.workers || !ids.insert(w.worker_id) {
                self.push(
                    format!("{path}.inputs.workers_uss[{k}].worker_id"),
                    format!("worker {} of {} (or twice)", w.worker_id, i.workers),
                    "each worker id once, below the worker count",
                );
            }
        }
    }
}

fn present(b: bool) -> &'static str {
    if b { "present" } else { "absent" }
}
