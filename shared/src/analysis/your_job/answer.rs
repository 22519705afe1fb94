//! A job bundle's answer in the few lines a review meeting reads first
//! (TensorFlow Profiler's input-pipeline analyzer: one sentence, then what
//! to try): the headline with its direction, unit and mode; the memory the
//! change costs, summed over the training process and its workers; the
//! loader's share of the step by both methods with why they differ; and the
//! next step when the loop stays input-bound. The viewer's job page reads it.

use crate::analysis::metric::Quantity;
use crate::analysis::metric::{Metric, MetricKey, metric_value, preferred_phase};
use crate::analysis::tune::NOISE_FLOOR;
use crate::analysis::units::{Unit, show_bytes, show_percent, show_ratio, show_step_ms};
use crate::analysis::verdict::InputBound;
use crate::format::{Bundle, Configuration, Experiment, ParamValue, TimingMode};

use super::{
    JOB_ID, JOB_REPLAY_ID, JOB_SCRIPT_ID, JOB_VERIFY_ID, JobDigest, ReplayCeiling, job_digest,
    memory_of, replay_stall,
};

/// One line beside a whole-run figure: what that mode measures.
pub const WHOLE_RUN_LINE: &str = "Whole-run: the loop timed as it trains, nothing synchronized \
     inside it, so loading, copying and computing overlap as they do for you: this is the speed \
     you get.";
/// One line beside a diagnostic figure: what that mode measures.
pub const DIAGNOSTIC_LINE: &str = "Diagnostic: the loop timed at every stage, synchronized at \
     each boundary, so nothing overlaps: it says where the step waits, not how fast it runs.";

/// Which way the change moved the job's whole-run samples/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    More,
    Fewer,
    /// Inside the noise: the pairs (or the grid's repeats) straddle no change.
    NoDifference,
}

/// What the headline's ratio rests on.
#[derive(Debug, Clone, PartialEq)]
pub enum Basis {
    /// Interleaved A/B pairs, each a fresh process: B ÷ A per pair.
    AbPairs { pairs: i64, min: f64, max: f64 },
    /// The tuning grid's medians over repeats, not verified.
    Grid,
    /// No change to measure: the script's own settings alone.
    Own,
}

/// The job page's first sentence.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    pub direction: Option<Direction>,
    /// B ÷ A of whole-run samples/s.
    pub ratio: Option<f64>,
    pub basis: Basis,
    /// `2.07× more samples/s, whole-run, measured A/B`.
    pub text: String,
    /// What the figure is, in one clause: the pairs and their range.
    pub detail: String,
}

/// A configuration's processes summed: main + workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySum {
    pub workers: usize,
    pub rss: u64,
    /// `None` when a process has no PSS (not Linux).
    pub pss: Option<u64>,
}

/// The memory of the script's settings and of the change's, summed.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryChange {
    pub before: MemorySum,
    pub after: MemorySum,
}

/// The loader's share of one configuration's step, by both methods.
#[derive(Debug, Clone, PartialEq)]
pub struct LoaderShare {
    pub label: String,
    /// Median share of a diagnostic step the training thread waited in
    /// `next()`.
    pub wait: Option<f64>,
    /// 1 − whole-run samples/s ÷ the replay's (the data free).
    pub by_replay: Option<f64>,
    /// Diagnostic compute per step with the loader running (median).
    pub compute_s: Option<f64>,
}

/// The answer of a job bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct JobAnswer {
    pub headline: Headline,
    pub memory: Option<MemoryChange>,
    /// The script's settings, then the change's when there is one.
    pub shares: Vec<LoaderShare>,
    /// Diagnostic compute per step in the replay (the data free).
    pub replay_compute_s: Option<f64>,
    /// Why the two shares differ, one line; `None` without both.
    pub shares_differ: Option<String>,
    /// What to do when the loop stays input-bound.
    pub next_step: Option<String>,
    /// The memory forecast of the configuration recommended (your
    /// settings when none is), as the terminal says it.
    pub forecast: Option<String>,
}

/// The two configurations the answer reads: the A/B pair's when verified,
/// else the job experiment's script and the grid's pick.
struct Sides<'a> {
    before: Option<(&'a Experiment, &'a Configuration)>,
    after: Option<(&'a Experiment, &'a Configuration)>,
}

fn sides<'a>(b: &'a Bundle, d: &JobDigest) -> Sides<'a> {
    let job = b.experiment(JOB_ID);
    let verify = b.experiment(JOB_VERIFY_ID);
    let pick =
        |e: Option<&'a Experiment>, id: &str| e.and_then(|e| Some((e, e.configuration(id)?)));
    let chosen = d
        .recommendation
        .as_ref()
        .filter(|r| r.is_change())
        .and_then(|r| r.chosen.clone());
    Sides {
        before: pick(verify, "original").or_else(|| pick(job, JOB_SCRIPT_ID)),
        after: chosen.and_then(|id| pick(verify, "recommended").or_else(|| pick(job, &id))),
    }
}

/// The answer of a bundle with a `job` experiment; `None` otherwise.
pub fn job_answer(b: &Bundle) -> Option<JobAnswer> {
    let d = job_digest(b)?;
    let s = sides(b, &d);
    let memory = s.before.zip(s.after).and_then(|(x, y)| {
        Some(MemoryChange {
            before: memory_sum(x.1)?,
            after: memory_sum(y.1)?,
        })
    });
    let job = b.experiment(JOB_ID)?;
    let share = |c: &Configuration| loader_share(job, c, d.replay.as_ref());
    let mut shares: Vec<LoaderShare> = job
        .configuration(JOB_SCRIPT_ID)
        .map(share)
        .into_iter()
        .collect();
    let chosen = d
        .recommendation
        .as_ref()
        .filter(|r| r.is_change())
        .and_then(|r| r.chosen.as_deref());
    shares.extend(chosen.and_then(|id| job.configuration(id)).map(share));
    let replay_compute_s = replay_compute(b);
    // The terminal's own sentence where it has one (one text for both).
    let shares_differ = crate::analysis::contention::sentence(b).or_else(|| {
        shares
            .first()
            .and_then(|s| differ_line(s, replay_compute_s))
    });
    Some(JobAnswer {
        headline: headline(&d, job),
        memory,
        next_step: next_step(b, &d, &s, shares.last()),
        shares,
        replay_compute_s,
        shares_differ,
        forecast: crate::analysis::forecast_text::forecast_line(job),
    })
}

fn headline(d: &JobDigest, job: &Experiment) -> Headline {
    let r = d.recommendation.as_ref();
    if let Some(v) = r.and_then(|r| r.verification.as_ref()) {
        let direction = ab_direction(v, job);
        let detail = format!(
            "the median of {} interleaved A/B pairs, your settings (A) against the change (B), \
             each run a fresh process; the pairs gave {}–{}",
            v.pairs,
            show_ratio(v.min),
            show_ratio(v.max)
        );
        return Headline {
            text: sentence(direction, v.median, "measured A/B"),
            direction: Some(direction),
            ratio: Some(v.median),
            basis: Basis::AbPairs {
                pairs: v.pairs,
                min: v.min,
                max: v.max,
            },
            detail,
        };
    }
    if let Some(r) = r {
        let (direction, ratio) = match r.grid_speedup.filter(|_| r.is_change()) {
            Some(x) if grid_clears(job, x) => (Direction::More, x),
            Some(x) => (Direction::NoDifference, x),
            None => (Direction::NoDifference, 1.0),
        };
        let repeats = repeats(job);
        return Headline {
            text: sentence(direction, ratio, "in the grid, not verified A/B"),
            direction: Some(direction),
            ratio: r.grid_speedup,
            basis: Basis::Grid,
            detail: format!(
                "the grid's medians over {repeats} repeat{}, the pick against your settings",
                if repeats == 1 { "" } else { "s" }
            ),
        };
    }
    own_headline(d)
}

/// Whether the grid's pick is faster than your settings: past the job's
/// A/A floor (the rule `--tune` chose by) when it has one, else past the
/// 2% floor.
fn grid_clears(job: &Experiment, speedup: f64) -> bool {
    use crate::analysis::noise::RatioDifference;
    match crate::analysis::tune::tune_choice(job, JOB_SCRIPT_ID, &[]) {
        Some(c) if c.floor.is_some() => c
            .verdict
            .is_some_and(|v| v.difference == RatioDifference::Higher),
        _ => speedup > 1.0 + NOISE_FLOOR,
    }
}

/// The A/B pairs' direction: against the job's A/A noise floor when it
/// has one (the rule the terminal's verification uses), else every pair
/// past 1 and the median past the 2% floor.
fn ab_direction(v: &super::Verification, job: &Experiment) -> Direction {
    use crate::analysis::noise::{RatioDifference, job_noise_floor, judge, ratio_interval};
    let verify = v.ratios.as_slice();
    if let (Some(floor), Some(i)) = (job_noise_floor(job), ratio_interval(verify)) {
        return match judge(i, floor.rate_floor).difference {
            RatioDifference::Higher => Direction::More,
            RatioDifference::Lower => Direction::Fewer,
            RatioDifference::NoMeasurableDifference => Direction::NoDifference,
        };
    }
    if v.min > 1.0 && v.median > 1.0 + NOISE_FLOOR {
        Direction::More
    } else if v.max < 1.0 && v.median < 1.0 - NOISE_FLOOR {
        Direction::Fewer
    } else {
        Direction::NoDifference
    }
}

/// `2.07× more samples/s, whole-run, measured A/B`.
fn sentence(direction: Direction, ratio: f64, basis: &str) -> String {
    match direction {
        Direction::More => format!("{} more samples/s, whole-run, {basis}", show_ratio(ratio)),
        Direction::Fewer => format!(
            "{} fewer samples/s ({}), whole-run, {basis}",
            show_percent(1.0 - ratio),
            show_ratio(ratio)
        ),
        Direction::NoDifference => {
            format!("No measurable difference in samples/s, whole-run, {basis}")
        }
    }
}

/// A job without a recommendation: its own rate, and where its step waits.
fn own_headline(d: &JobDigest) -> Headline {
    let rate = d
        .script_rate
        .map(|r| Unit::for_values(Quantity::Rate, &[r]).show(r));
    let text = match rate {
        Some(r) => format!(
            "Your settings: {} samples/s, whole-run",
            r.trim_end_matches("/s")
        ),
        None => "Your settings: no whole-run figure".to_string(),
    };
    Headline {
        direction: None,
        ratio: None,
        basis: Basis::Own,
        text,
        detail: d
            .script_step_s
            .map(|s| format!("a step of {} on average", show_step_ms(s)))
            .unwrap_or_default(),
    }
}

/// How many whole-run repeats the script's settings ran.
fn repeats(job: &Experiment) -> usize {
    job.configuration(JOB_SCRIPT_ID)
        .map(|c| {
            c.runs
                .iter()
                .filter(|r| r.timing_mode == TimingMode::WholeRun)
                .count()
        })
        .unwrap_or(0)
}

/// A configuration's processes summed, from the run the memory table shows.
fn memory_sum(c: &Configuration) -> Option<MemorySum> {
    let m = memory_of(c)?;
    let rss = m
        .processes
        .iter()
        .map(|p| p.rss_bytes)
        .sum::<Option<u64>>()?;
    Some(MemorySum {
        workers: m.processes.iter().filter(|p| p.role == "worker").count(),
        rss,
        pss: m.processes.iter().map(|p| p.pss_bytes).sum(),
    })
}

fn loader_share(
    job: &Experiment,
    c: &Configuration,
    replay: Option<&ReplayCeiling>,
) -> LoaderShare {
    let phase = preferred_phase(job);
    let diag = |m| metric_value(c, &MetricKey::new(m, TimingMode::Diagnostic, phase));
    let rate = metric_value(
        c,
        &MetricKey::new(Metric::SamplesPerS, TimingMode::WholeRun, phase),
    );
    LoaderShare {
        label: c.label.clone(),
        wait: diag(Metric::WaitShare),
        by_replay: replay.zip(rate).map(|(r, x)| replay_stall(x, r)),
        compute_s: diag(Metric::ComputeMedianS),
    }
}

fn replay_compute(b: &Bundle) -> Option<f64> {
    let e = b.experiment(JOB_REPLAY_ID)?;
    let c = e.configurations.first()?;
    metric_value(
        c,
        &MetricKey::new(
            Metric::ComputeMedianS,
            TimingMode::Diagnostic,
            preferred_phase(e),
        ),
    )
}

/// Points apart below which the two shares are said to agree.
const AGREE_POINTS: f64 = 0.05;

/// Why the wait share and the replay's share differ, in one line.
fn differ_line(s: &LoaderShare, replay_compute: Option<f64>) -> Option<String> {
    let (wait, replay) = (s.wait?, s.by_replay?);
    let apart = replay - wait;
    if apart.abs() < AGREE_POINTS {
        return Some(format!(
            "The two agree within {} points: the training thread's wait is the loader's cost.",
            show_points(apart.abs())
        ));
    }
    let compute = match (s.compute_s, replay_compute) {
        (Some(with), Some(free)) => format!(
            " Here compute took {} per step with the loader running against {} with the data free.",
            show_step_ms(with),
            show_step_ms(free)
        ),
        _ => String::new(),
    };
    Some(if apart > 0.0 {
        format!(
            "Why they differ ({} points): the wait is only what the training thread spent blocked \
             in next(); the share by replay also counts the loader slowing compute by taking its \
             cores (contention).{compute}",
            show_points(apart)
        )
    } else {
        format!(
            "Why they differ ({} points): the wait counts time the loop would also spend without \
             the loader (the diagnostic barriers); the share by replay is the whole-run cost.",
            show_points(-apart)
        )
    })
}

fn show_points(share: f64) -> String {
    let p = share * 100.0;
    if p >= 10.0 {
        format!("{p:.0}")
    } else {
        format!("{p:.1}")
    }
}

/// The next step when the final settings leave the loop input-bound.
fn next_step(b: &Bundle, d: &JobDigest, s: &Sides, last: Option<&LoaderShare>) -> Option<String> {
    let last = last?;
    let share = last.by_replay.or(last.wait)?;
    if InputBound::of_share(share) != InputBound::Highly {
        return None;
    }
    let (e, c) = s.after.or(s.before)?;
    let step = metric_value(
        c,
        &MetricKey::new(Metric::StepTimeS, TimingMode::WholeRun, preferred_phase(e)),
    );
    let who = if s.after.is_some() {
        "After the change"
    } else {
        "With your settings"
    };
    let mut out = format!(
        "{who} the loop is still input-bound: the loader takes {} of the step.",
        show_percent(share)
    );
    if let (Some(step), Some(free)) = (step, d.replay.as_ref().map(|r| r.step_s)) {
        out.push_str(&format!(
            " A step takes {} where the model needs {} with the data free: the loader has to \
             deliver batches about {} faster to stop being the limit.",
            show_step_ms(step),
            show_step_ms(free),
            show_ratio(step / free)
        ));
    }
    out.push_str(&cores_clause(b, c));
    let dataset = d
        .dataloader
        .iter()
        .find(|(k, _)| k == "dataset")
        .map(|(_, v)| format!(" of {v}"))
        .unwrap_or_default();
    out.push_str(&format!(
        " Make each sample cheaper (profile __getitem__{dataset}), cache or pre-process the \
         samples, or give the loader more cores."
    ));
    Some(out)
}

/// Whether more workers could still help on this machine.
fn cores_clause(b: &Bundle, c: &Configuration) -> String {
    let cores = b.environment.host.as_ref().and_then(|h| h.logical_cores);
    let workers = match c.params.get("actual_num_workers") {
        Some(ParamValue::Int(n)) => Some(*n),
        _ => None,
    };
    match (cores, workers) {
        (Some(cores), Some(w)) if w >= i64::from(cores) => format!(
            " More workers cannot do it here: {w} worker{} already on this machine's {cores} \
             core{}.",
            if w == 1 { "" } else { "s" },
            if cores == 1 { "" } else { "s" }
        ),
        _ => String::new(),
    }
}

impl MemoryChange {
    /// `PSS 560 MiB → 582 MiB (+22 MiB); RSS 562 MiB → 1.23 GiB (+703 MiB)`.
    pub fn text(&self) -> String {
        let pair = |name: &str, a: u64, b: u64| {
            format!(
                "{name} {} → {} ({})",
                show_bytes(a as f64),
                show_bytes(b as f64),
                signed_bytes(b as f64 - a as f64)
            )
        };
        let rss = pair("RSS", self.before.rss, self.after.rss);
        match (self.before.pss, self.after.pss) {
            (Some(a), Some(b)) => format!("{}; {rss}", pair("PSS", a, b)),
            _ => rss,
        }
    }

    /// `the training process, then it and 2 workers`.
    pub fn processes(&self) -> String {
        let side = |m: &MemorySum| match m.workers {
            0 => "the training process alone".to_string(),
            1 => "the training process + 1 worker".to_string(),
            n => format!("the training process + {n} workers"),
        };
        format!("{} → {}", side(&self.before), side(&self.after))
    }
}

/// `+22 MiB`, `−1.5 MiB`.
pub fn signed_bytes(delta: f64) -> String {
    if delta < 0.0 {
        format!("−{}", show_bytes(-delta))
    } else {
        format!("+{}", show_bytes(delta))
    }
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
