//! Semantic validation of a decoded bundle: every problem, each with its JSON
//! path, what was found and what was expected.
//!
//! Measured bundles must be complete (both figures of a whole-run run, every
//! stage of a diagnostic run, the environment); published bundles may carry
//! only the figures the publication gives, but what they carry must be sane.
//! The checks of the format 1.2 fields (ranks, comm, CPU cost, timelines)
//! are in [`format12`], of the 1.3 fields (a merged configuration's rank
//! columns, sidecars, job runs) in [`format13`], of the 1.4 worker tracks in
//! [`tracks`], of the 1.5 limits, peaks, noise floor, forecasts and failures
//! in [`format15`]; a job bundle's derived figures are recomputed from its
//! runs in [`job`].

use std::collections::HashSet;

use crate::format::*;

mod format12;
mod format13;
mod format15;
mod job;
mod tracks;

/// One thing wrong with a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// JSON path, e.g. `$.experiments[0].configurations[2].runs[1].whole_run.seconds`.
    pub path: String,
    /// What was found.
    pub message: String,
    /// What was expected.
    pub expected: String,
}

impl Problem {
    pub fn new(
        path: impl Into<String>,
        message: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        Problem {
            path: path.into(),
            message: message.into(),
            expected: expected.into(),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "at {}: {}; expected {}.",
            self.path, self.message, self.expected
        )
    }
}

/// Relative tolerance of samples/s against samples ÷ seconds for measured runs.
const MEASURED_RATE_TOLERANCE: f64 = 1e-6;
/// For published tables, whose medians are rounded separately.
const PUBLISHED_RATE_TOLERANCE: f64 = 0.01;

/// Every semantic problem of a bundle (empty when it is valid).
pub fn validate(bundle: &Bundle) -> Vec<Problem> {
    let mut v = Validator {
        problems: Vec::new(),
        measured: bundle.is_measured(),
        complete: bundle.status.state == RunState::Complete,
        ranks: (!bundle.ranks.is_empty()).then(|| bundle.ranks.iter().map(|r| r.rank).collect()),
        limits: bundle.environment.limits.clone(),
        pooled: false,
    };
    v.bundle(bundle);
    v.problems
}

struct Validator {
    problems: Vec<Problem>,
    measured: bool,
    /// A partial or running bundle may hold configurations not reached yet.
    complete: bool,
    /// The ranks a merged bundle lists (`None` for a single process).
    ranks: Option<HashSet<u32>>,
    /// The machine's limits, which forecasts are held to.
    limits: Option<HostLimits>,
    /// The configuration being checked pools its ranks' runs (a merged
    /// bundle): each memory counter is its largest rank's and the process
    /// list one rank's, so the two need not agree.
    pooled: bool,
}

impl Validator {
    fn push(
        &mut self,
        path: impl Into<String>,
        message: impl Into<String>,
        expected: impl Into<String>,
    ) {
        self.problems.push(Problem::new(path, message, expected));
    }

    fn bundle(&mut self, b: &Bundle) {
        if b.id.trim().is_empty() {
            self.push("$.id", "the id is empty", "a non-empty id");
        }
        if b.title.trim().is_empty() {
            self.push("$.title", "the title is empty", "a non-empty title");
        }
        if b.created_at.trim().is_empty() {
            self.push(
                "$.created_at",
                "the time is empty",
                "an RFC 3339 time such as 2026-11-30T12:00:00Z",
            );
        }
        match &b.provenance {
            Provenance::Published { citation, .. } => {
                if citation.title.trim().is_empty() {
                    self.push(
                        "$.provenance.citation.title",
                        "the citation has no title",
                        "the title of the publication the figures come from",
                    );
                }
            }
            Provenance::Measured => self.environment(&b.environment),
        }
        if let Some(l) = &b.environment.rank {
            self.rank_layout(l, "$.environment.rank");
        }
        if let Some(l) = &b.environment.limits {
            self.limits(l);
        }
        self.ranks(&b.ranks);
        let mut ids = HashSet::new();
        for (i, e) in b.experiments.iter().enumerate() {
            let path = format!("$.experiments[{i}]");
            if !ids.insert(e.id.as_str()) {
                self.push(
                    format!("{path}.id"),
                    format!("the id {:?} is used twice", e.id),
                    "experiment ids unique within the bundle",
                );
            }
            self.experiment(e, &path);
        }
        self.job(b);
    }

    fn environment(&mut self, env: &Environment) {
        if env.runner.is_none() {
            self.push(
                "$.environment.runner",
                "missing",
                "the runner's name and version (a measured bundle records them)",
            );
        }
        if env.host.is_none() {
            self.push(
                "$.environment.host",
                "missing",
                "the host's CPU, cores, memory and OS (a measured bundle records them)",
            );
        }
        if env.device.is_none() {
            self.push(
                "$.environment.device",
                "missing",
                "the device the experiments ran on (a measured bundle records it)",
            );
        }
        if let Some(d) = &env.device
            && d.name.trim().is_empty()
        {
            self.push(
                "$.environment.device.name",
                "the name is empty",
                "the device's name",
            );
        }
    }

    fn experiment(&mut self, e: &Experiment, path: &str) {
        if e.id.trim().is_empty() {
            self.push(
                format!("{path}.id"),
                "the id is empty",
                "a non-empty experiment id",
            );
        }
        if e.not_applicable.is_some() && !e.configurations.is_empty() {
            self.push(
                format!("{path}.not_applicable"),
                format!(
                    "the experiment is marked not applicable but has {} configurations",
                    e.configurations.len()
                ),
                "either a reason it could not run, or configurations — not both",
            );
        }
        if let Some(base) = &e.baseline
            && e.configuration(base).is_none()
        {
            self.push(
                format!("{path}.baseline"),
                format!("no configuration has the id {base:?}"),
                "the id of one of the experiment's configurations",
            );
        }
        let mut ids = HashSet::new();
        for (j, c) in e.configurations.iter().enumerate() {
            let cpath = format!("{path}.configurations[{j}]");
            if !ids.insert(c.id.as_str()) {
                self.push(
                    format!("{cpath}.id"),
                    format!("the id {:?} is used twice", c.id),
                    "configuration ids unique within the experiment",
                );
            }
            if c.id.trim().is_empty() {
                self.push(
                    format!("{cpath}.id"),
                    "the id is empty",
                    "a non-empty configuration id",
                );
            }
            self.swept_params(&e.swept, c, &cpath);
            self.configuration(c, &cpath);
        }
        self.noise_floor(e, path);
    }

    /// Every swept knob has a value in `params` or a reason in
    /// `not_applicable`, never both; `not_applicable` names only swept knobs.
    fn swept_params(&mut self, swept: &[String], c: &Configuration, path: &str) {
        for name in swept {
            match (c.params.contains_key(name), c.not_applicable.get(name)) {
                (false, None) => self.push(
                    format!("{path}.params"),
                    format!("the swept parameter {name:?} is missing"),
                    "a value for every parameter listed in the experiment's `swept`, or the reason it does not apply in `not_applicable`",
                ),
                (true, Some(_)) => self.push(
                    format!("{path}.not_applicable.{name}"),
                    format!("the swept parameter {name:?} has a value in `params` and is also marked not applicable"),
                    "either a value or a reason it does not apply — not both",
                ),
                (false, Some(reason)) if reason.trim().is_empty() => self.push(
                    format!("{path}.not_applicable.{name}"),
                    "the reason is empty",
                    "why the parameter does not apply to this configuration",
                ),
                _ => {}
            }
        }
        for name in c.not_applicable.keys() {
            if !swept.contains(name) {
                self.push(
                    format!("{path}.not_applicable.{name}"),
                    format!("{name:?} is not a swept parameter of the experiment"),
                    "only parameters listed in the experiment's `swept`",
                );
            }
        }
    }

    fn configuration(&mut self, c: &Configuration, path: &str) {
        // A configuration whose engine (or DALI's decoder placement) is not
        // applicable here has nothing to run.
        if self.complete
            && c.runs.is_empty()
            && c.failure.is_none()
            && c.cannot_run_here().is_none()
        {
            self.push(
                format!("{path}.runs"),
                "no runs and no failure",
                "at least one run, or the failure that prevented them (a bundle whose state is \"complete\" ran every configuration)",
            );
        }
        let mut ids = HashSet::new();
        self.pooled = c.ranks.is_some();
        for (k, r) in c.runs.iter().enumerate() {
            let rpath = format!("{path}.runs[{k}]");
            if !ids.insert(r.id.as_str()) {
                self.push(
                    format!("{rpath}.id"),
                    format!("the id {:?} is used twice", r.id),
                    "run ids unique within the configuration",
                );
            }
            self.run(r, &rpath);
        }
        if let Some(f) = &c.failure {
            self.comm_timeout(f, &format!("{path}.failure"));
            self.fit_failure(f, &format!("{path}.failure"));
        }
        self.forecast(c, path);
        self.rank_columns(c, path);
        if let Some(Failure::OutOfMemory(oom)) = &c.failure
            && let Some(f) = oom.memory_fraction
            && !(f.is_finite() && f > 0.0 && f <= 1.0)
        {
            self.push(
                format!("{path}.failure.memory_fraction"),
                format!("found {f}"),
                "a fraction in (0, 1]",
            );
        }
    }

    fn run(&mut self, r: &Run, path: &str) {
        match r.timing_mode {
            TimingMode::WholeRun => {
                if r.diagnostic.is_some() {
                    self.push(
                        format!("{path}.diagnostic"),
                        "a whole-run run carries diagnostic figures",
                        "diagnostic figures only in runs whose timing_mode is \"diagnostic\" (the two modes are never mixed)",
                    );
                }
                if r.steps.is_some() {
                    self.push(
                        format!("{path}.steps"),
                        "a whole-run run carries per-step timings",
                        "per-step timings only in diagnostic runs",
                    );
                }
                match &r.whole_run {
                    None => self.push(
                        format!("{path}.whole_run"),
                        "missing",
                        "epoch seconds, samples and samples/s for a whole-run run",
                    ),
                    Some(w) => self.whole_run(w, &format!("{path}.whole_run")),
                }
            }
            TimingMode::Diagnostic => {
                if r.whole_run.is_some() {
                    self.push(
                        format!("{path}.whole_run"),
                        "a diagnostic run carries whole-run figures",
                        "whole-run figures only in runs whose timing_mode is \"whole_run\" (the two modes are never mixed)",
                    );
                }
                match &r.diagnostic {
                    None => self.push(
                        format!("{path}.diagnostic"),
                        "missing",
                        "per-stage statistics (next_wait, transfer, compute) for a diagnostic run",
                    ),
                    Some(d) => self.diagnostic(d, &format!("{path}.diagnostic")),
                }
                if let Some(s) = &r.steps {
                    let n = s.next_wait_ns.len();
                    if s.transfer_ns.len() != n || s.compute_ns.len() != n {
                        self.push(
                            format!("{path}.steps"),
                            format!(
                                "columns of different lengths (next_wait {n}, transfer {}, compute {})",
                                s.transfer_ns.len(),
                                s.compute_ns.len()
                            ),
                            "one entry per step in every column",
                        );
                    }
                    self.comm_series(s, &format!("{path}.steps"));
                }
            }
            // A mode from a newer format (read only from such a bundle): its
            // figures are not read, so there is nothing of it to check here.
            TimingMode::Unknown(_) => {}
        }
        if let Some(m) = &r.memory {
            self.memory(m, &format!("{path}.memory"));
        }
        if let Some(l) = &r.loader {
            self.loader(l, &format!("{path}.loader"));
        }
        self.run_rank(r.rank, path);
        if let Some(c) = &r.cost {
            let samples = crate::analysis::run_samples(r);
            self.cost(c, samples, &format!("{path}.cost"));
        }
        if let Some(t) = &r.timeline {
            self.timeline(t, &format!("{path}.timeline"));
        }
        if let Some(t) = &r.worker_tracks {
            self.worker_tracks(r, t, &format!("{path}.worker_tracks"));
        }
    }

    fn seconds(&mut self, v: Option<f64>, path: String, required: bool, what: &str) {
        match v {
            None if required && self.measured => self.push(
                path,
                "missing",
                format!("{what} (a measured run records it)"),
            ),
            None => {}
            Some(s) if !s.is_finite() || s < 0.0 => self.push(
                path,
                format!("found {s}"),
                format!("{what}: a finite, non-negative number of seconds"),
            ),
            Some(_) => {}
        }
    }

    fn whole_run(&mut self, w: &WholeRun, path: &str) {
        self.seconds(
            w.seconds,
            format!("{path}.seconds"),
            true,
            "the epoch's wall seconds",
        );
        if let Some(s) = w.seconds
            && s == 0.0
        {
            self.push(
                format!("{path}.seconds"),
                "found 0",
                "a positive number of seconds for a timed epoch",
            );
        }
        self.seconds(
            w.step_s,
            format!("{path}.step_s"),
            false,
            "the mean step time",
        );
        if let (Some(step), Some(s), Some(n)) = (w.step_s, w.seconds, w.steps)
            && n > 0
            && step.is_finite()
        {
            let expect = s / n as f64;
            let tol = if self.measured {
                MEASURED_RATE_TOLERANCE
            } else {
                PUBLISHED_RATE_TOLERANCE
            };
            if (step - expect).abs() > tol * expect {
                self.push(
                    format!("{path}.step_s"),
                    format!("found {step}, but seconds ÷ steps = {s} ÷ {n} = {expect:.6}"),
                    format!(
                        "the mean step time equal to seconds ÷ steps (within {}%)",
                        tol * 100.0
                    ),
                );
            }
        }
        if self.measured && w.samples.is_none() {
            self.push(
                format!("{path}.samples"),
                "missing",
                "the number of samples in the epoch (a measured run records it)",
            );
        }
        match w.samples_per_s {
            None if self.measured => self.push(
                format!("{path}.samples_per_s"),
                "missing",
                "samples ÷ seconds",
            ),
            None => {}
            Some(r) if !r.is_finite() || r <= 0.0 => self.push(
                format!("{path}.samples_per_s"),
                format!("found {r}"),
                "a finite, positive rate",
            ),
            Some(rate) => {
                if let (Some(n), Some(s)) = (w.samples, w.seconds)
                    && s > 0.0
                    && s.is_finite()
                {
                    let expect = n as f64 / s;
                    let tol = if self.measured {
                        MEASURED_RATE_TOLERANCE
                    } else {
                        PUBLISHED_RATE_TOLERANCE
                    };
                    if (rate - expect).abs() > tol * expect {
                        self.push(
                            format!("{path}.samples_per_s"),
                            format!(
                                "found {rate}, but samples ÷ seconds = {n} ÷ {s} = {expect:.3}"
                            ),
                            format!(
                                "samples/s equal to samples ÷ seconds (within {}%)",
                                tol * 100.0
                            ),
                        );
                    }
                }
            }
        }
    }

    fn diagnostic(&mut self, d: &Diagnostic, path: &str) {
        self.seconds(
            d.seconds,
            format!("{path}.seconds"),
            true,
            "the diagnostic epoch's wall seconds",
        );
        self.seconds(
            d.iterator_creation_s,
            format!("{path}.iterator_creation_s"),
            false,
            "the iterator creation time",
        );
        self.seconds(
            d.first_next_wait_s,
            format!("{path}.first_next_wait_s"),
            false,
            "the first next() wait",
        );
        let stages = [
            ("next_wait", &d.next_wait),
            ("transfer", &d.transfer),
            ("compute", &d.compute),
            ("comm", &d.comm),
            ("step", &d.step),
        ];
        let present = stages.iter().filter(|(_, s)| s.is_some()).count();
        if present == 0 {
            self.push(
                path.to_string(),
                "a diagnostic run without stages",
                "statistics for next_wait, transfer and compute (the point of a diagnostic run)",
            );
        }
        for (name, stat) in stages {
            let spath = format!("{path}.{name}");
            match stat {
                None if self.measured && name != "step" && name != "comm" => {
                    self.push(spath, "missing", format!("the {name} stage's mean, median and p95 (a measured diagnostic run records every stage)"))
                }
                None => {}
                Some(s) => self.stage(s, &spath),
            }
        }
    }

    fn stage(&mut self, s: &StageStat, path: &str) {
        let fields = [
            ("mean_s", s.mean_s),
            ("median_s", s.median_s),
            ("p95_s", s.p95_s),
            ("min_s", s.min_s),
            ("max_s", s.max_s),
            ("total_s", s.total_s),
        ];
        for (name, v) in fields {
            let required = matches!(name, "mean_s" | "median_s" | "p95_s");
            self.seconds(
                v,
                format!("{path}.{name}"),
                required,
                &format!("the stage's {name}"),
            );
        }
        if let (Some(lo), Some(hi)) = (s.min_s, s.max_s) {
            for (name, v) in [
                ("mean_s", s.mean_s),
                ("median_s", s.median_s),
                ("p95_s", s.p95_s),
            ] {
                if let Some(v) = v {
                    // Allow rounding in the last digits.
                    let slack = 1e-9 * hi.abs().max(1.0);
                    if v < lo - slack || v > hi + slack {
                        self.push(
                            format!("{path}.{name}"),
                            format!("found {v}, outside min {lo} .. max {hi}"),
                            "a value between the stage's min and max",
                        );
                    }
                }
            }
        }
        if let (Some(m), Some(p)) = (s.median_s, s.p95_s)
            && p + 1e-12 < m
        {
            self.push(
                format!("{path}.p95_s"),
                format!("found {p}, below the median {m}"),
                "a 95th percentile at least the median",
            );
        }
    }

    fn memory(&mut self, m: &Memory, path: &str) {
        if let (Some(a), Some(r)) = (m.device_peak_allocated_bytes, m.device_peak_reserved_bytes)
            && self.measured
            && a > r
        {
            self.push(
                format!("{path}.device_peak_allocated_bytes"),
                format!("peak allocated {a} exceeds peak reserved {r}"),
                "peak allocated ≤ peak reserved (the caching allocator hands out what it reserved)",
            );
        }
        if let (Some(u), Some(t)) = (m.device_used_bytes, m.device_total_bytes)
            && u > t
        {
            self.push(
                format!("{path}.device_used_bytes"),
                format!("used {u} exceeds total {t}"),
                "used ≤ total device memory",
            );
        }
        self.process_peaks(m, path);
        for (i, p) in m.processes.iter().enumerate() {
            let pairs = [
                ("uss_bytes", p.uss_bytes, "pss_bytes", p.pss_bytes),
                ("pss_bytes", p.pss_bytes, "rss_bytes", p.rss_bytes),
            ];
            for (small, a, large, b) in pairs {
                if let (Some(a), Some(b)) = (a, b)
                    && a > b
                {
                    self.push(
                        format!("{path}.processes[{i}].{small}"),
                        format!("{small} {a} exceeds {large} {b}"),
                        "USS ≤ PSS ≤ RSS (private pages, a share of every page, every page)",
                    );
                }
            }
        }
    }

    fn loader(&mut self, l: &LoaderStats, path: &str) {
        self.seconds(
            l.time_to_first_batch_s,
            format!("{path}.time_to_first_batch_s"),
            false,
            "the time to the first batch",
        );
        for (i, s) in l.stages.iter().enumerate() {
            let v = s.mean_task_s;
            if !v.is_finite() || v < 0.0 {
                self.push(
                    format!("{path}.stages[{i}].mean_task_s"),
                    format!("found {v}"),
                    "a finite, non-negative number of seconds",
                );
            }
        }
        for (i, q) in l.queues.iter().enumerate() {
            if !(q.readiness.is_finite() && (0.0..=1.0).contains(&q.readiness)) {
                self.push(
                    format!("{path}.queues[{i}].readiness"),
                    format!("found {}", q.readiness),
                    "a share between 0 and 1",
                );
            }
            if !q.get_wait_s.is_finite() || q.get_wait_s < 0.0 {
                self.push(
                    format!("{path}.queues[{i}].get_wait_s"),
                    format!("found {}", q.get_wait_s),
                    "a finite, non-negative number of seconds",
                );
            }
        }
    }
}
