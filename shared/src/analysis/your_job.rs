//! A `stallscope job` bundle read as the answer to its user's question:
//! the command, the settings the job really used, the recommendation as the
//! change to make with its verified A/B ratio, the replay ceiling with the
//! stall by difference, and each configuration's memory per worker process.
//! The runner's closing text and the viewer's job page both read it here.
//!
//! The experiments of such a bundle (docs/your-job.md): `job` (the script's
//! own settings, `script`, then the sweep's or the tuning grid's points),
//! `job-replay` (the loop with the loader free) and `job-verify` (the A/B
//! pairs of `original` and `recommended`).

mod answer;
mod title;

pub use answer::*;
pub use title::*;

use crate::analysis::metric::{Metric, MetricKey, metric_value, preferred_phase};
use crate::format::{Bundle, Configuration, Experiment, ParamValue, ProcessMemory, TimingMode};

/// The experiment ids of a job bundle.
pub const JOB_ID: &str = "job";
pub const JOB_REPLAY_ID: &str = "job-replay";
pub const JOB_VERIFY_ID: &str = "job-verify";
/// The configuration of the script's own settings.
pub const JOB_SCRIPT_ID: &str = "script";

/// A job configuration's parameter that says how its wait was seen
/// (docs/job-protocol.md `wait.method`): `training_thread`, `partial`,
/// `unseen` or `loader_next`.
pub const WAIT_METHOD_PARAM: &str = "wait_method";
/// No step's batch was seen in the training thread: the wait figures are
/// not the training thread's and are left out.
pub const WAIT_UNSEEN: &str = "unseen";
/// Some steps' batches were not seen.
pub const WAIT_PARTIAL: &str = "partial";

/// Whether `c`'s wait was not seen at all (its wait figures are left out).
pub fn wait_unseen(c: &Configuration) -> bool {
    matches!(c.params.get(WAIT_METHOD_PARAM), Some(ParamValue::Text(m)) if m == WAIT_UNSEEN)
}

/// The replay's whole-run figures (medians): the ceiling of the job's loop
/// with free data.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayCeiling {
    pub rate: f64,
    pub step_s: f64,
    /// Batches held in memory, and their bytes.
    pub batches: Option<i64>,
    pub bytes: Option<i64>,
}

/// The replay ceiling of a job bundle; `None` without a successful replay.
pub fn replay_ceiling(b: &Bundle) -> Option<ReplayCeiling> {
    let e = b.experiment(JOB_REPLAY_ID)?;
    let c = e.configurations.first().filter(|c| c.failure.is_none())?;
    let int = |k: &str| match c.params.get(k) {
        Some(ParamValue::Int(n)) => Some(*n),
        _ => None,
    };
    Some(ReplayCeiling {
        rate: whole_run(e, c, Metric::SamplesPerS)?,
        step_s: whole_run(e, c, Metric::StepTimeS)?,
        batches: int("replay_batches"),
        bytes: int("replay_bytes"),
    })
}

/// The stall by difference of a configuration at `rate` samples/s: the
/// share of its step the loader costs (never below 0).
pub fn replay_stall(rate: f64, ceiling: &ReplayCeiling) -> f64 {
    (1.0 - rate / ceiling.rate).max(0.0)
}

fn whole_run(e: &Experiment, c: &Configuration, m: Metric) -> Option<f64> {
    metric_value(
        c,
        &MetricKey::new(m, TimingMode::WholeRun, preferred_phase(e)),
    )
}

/// The A/B verification of a recommendation: B ÷ A per pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Verification {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub pairs: i64,
    /// e.g. `AB, BA, AB`.
    pub order: Option<String>,
    /// As stored: the pairs clear the A/A floor (every pair faster in a
    /// bundle without one).
    pub confirmed: bool,
    /// Each pair's B ÷ A.
    pub ratios: Vec<f64>,
}

/// What `--tune` concluded, from the job experiment's `tune_*` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    /// The change to make (`DataLoader(..., num_workers=4)`), or a sentence
    /// starting with `none:` when the settings are to be kept.
    pub change: Option<String>,
    /// Every paragraph the runner printed, joined.
    pub text: Option<String>,
    pub chosen: Option<String>,
    pub fastest: Option<String>,
    /// The grid's median speed-up of the chosen over the script's own.
    pub grid_speedup: Option<f64>,
    pub verification: Option<Verification>,
}

impl Recommendation {
    /// Whether the recommendation is a change (not "keep your settings").
    pub fn is_change(&self) -> bool {
        self.change
            .as_deref()
            .is_some_and(|c| !c.starts_with("none"))
    }
}

/// One process of a configuration's measured window, at its end.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigurationMemory {
    pub id: String,
    pub label: String,
    /// The processes of the configuration's last whole-run run that
    /// recorded them (main first, then the workers by id, then the rest).
    pub processes: Vec<ProcessMemory>,
}

/// A job bundle, digested.
#[derive(Debug, Clone, PartialEq)]
pub struct JobDigest {
    pub command: Option<String>,
    pub steps: Option<i64>,
    pub warmup: Option<i64>,
    /// The DataLoader as the script built it: class, dataset, sampler,
    /// collate function.
    pub dataloader: Vec<(String, String)>,
    /// The script's own DataLoader arguments as read back (`actual_*`).
    pub script_settings: Vec<(String, String)>,
    /// Why the grid is what it is (`--tune`).
    pub grid: Option<String>,
    pub recommendation: Option<Recommendation>,
    pub replay: Option<ReplayCeiling>,
    /// The script's own settings, whole-run medians: samples/s, step time.
    pub script_rate: Option<f64>,
    pub script_step_s: Option<f64>,
    /// The stall by difference of the script's own settings.
    pub script_stall: Option<f64>,
    pub memory: Vec<ConfigurationMemory>,
}

fn text(e: &Experiment, key: &str) -> Option<String> {
    e.settings.get(key).map(|v| match v {
        ParamValue::Text(s) => s.clone(),
        other => other.to_string(),
    })
}

fn number(e: &Experiment, key: &str) -> Option<f64> {
    match e.settings.get(key)? {
        ParamValue::Float(x) => Some(*x),
        ParamValue::Int(n) => Some(*n as f64),
        _ => None,
    }
}

fn int(e: &Experiment, key: &str) -> Option<i64> {
    match e.settings.get(key)? {
        ParamValue::Int(n) => Some(*n),
        _ => None,
    }
}

/// The digest of a bundle with a `job` experiment; `None` otherwise.
pub fn job_digest(b: &Bundle) -> Option<JobDigest> {
    let e = b.experiment(JOB_ID)?;
    let script = e.configuration(JOB_SCRIPT_ID);
    let dataloader = ["class", "dataset", "sampler", "collate_fn"]
        .iter()
        .filter_map(|k| Some((k.to_string(), text(e, &format!("dataloader_{k}"))?)))
        .collect();
    let script_settings = script
        .map(|c| {
            c.params
                .iter()
                .filter_map(|(k, v)| Some((k.strip_prefix("actual_")?.to_string(), v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let replay = replay_ceiling(b);
    let script_rate = script.and_then(|c| whole_run(e, c, Metric::SamplesPerS));
    let script_step_s = script.and_then(|c| whole_run(e, c, Metric::StepTimeS));
    let script_stall = replay
        .as_ref()
        .zip(script_rate)
        .map(|(r, x)| replay_stall(x, r));
    Some(JobDigest {
        command: text(e, "command"),
        steps: int(e, "steps"),
        warmup: int(e, "warmup"),
        dataloader,
        script_settings,
        grid: text(e, "tune_grid"),
        recommendation: recommendation(b, e),
        replay,
        script_rate,
        script_step_s,
        script_stall,
        memory: e.configurations.iter().filter_map(memory_of).collect(),
    })
}

fn recommendation(b: &Bundle, e: &Experiment) -> Option<Recommendation> {
    let text_of = |k: &str| text(e, k);
    let r = Recommendation {
        change: text_of("tune_change"),
        text: text_of("tune_recommendation"),
        chosen: text_of("tune_chosen"),
        fastest: text_of("tune_fastest"),
        grid_speedup: number(e, "tune_speedup"),
        verification: b.experiment(JOB_VERIFY_ID).and_then(verification),
    };
    (r.text.is_some() || r.change.is_some()).then_some(r)
}

fn verification(v: &Experiment) -> Option<Verification> {
    Some(Verification {
        median: number(v, "ratio_median")?,
        min: number(v, "ratio_min")?,
        max: number(v, "ratio_max")?,
        pairs: int(v, "pairs")?,
        order: text(v, "pair_order"),
        confirmed: matches!(v.settings.get("confirmed"), Some(ParamValue::Bool(true))),
        ratios: crate::analysis::tune::pair_ratios(v, "original", "recommended"),
    })
}

/// A configuration's processes from its last whole-run run that has them.
fn memory_of(c: &Configuration) -> Option<ConfigurationMemory> {
    let run = c.runs.iter().rfind(|r| {
        r.timing_mode == TimingMode::WholeRun
            && r.memory.as_ref().is_some_and(|m| !m.processes.is_empty())
    })?;
    let mut processes = run.memory.as_ref()?.processes.clone();
    let order = |p: &ProcessMemory| match p.role.as_str() {
        "main" => (0, 0),
        "worker" => (1, p.worker_id.unwrap_or(u32::MAX)),
        _ => (2, 0),
    };
    processes.sort_by_key(order);
    Some(ConfigurationMemory {
        id: c.id.clone(),
        label: c.label.clone(),
        processes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Memory, Phase, Run};

    fn process(role: &str, id: Option<u32>, uss: u64) -> ProcessMemory {
        ProcessMemory {
            role: role.into(),
            worker_id: id,
            rss_bytes: Some(uss * 3),
            pss_bytes: Some(uss * 2),
            uss_bytes: Some(uss),
            ..ProcessMemory::default()
        }
    }

    #[test]
    fn memory_comes_from_the_last_whole_run_run_main_first_workers_by_id() {
        let mut c = Configuration::new("script", "your settings");
        for (i, (mode, uss)) in [
            (TimingMode::WholeRun, 10),
            (TimingMode::WholeRun, 20),
            (TimingMode::Diagnostic, 30),
        ]
        .into_iter()
        .enumerate()
        {
            let mut r = Run::new(format!("r{i}"), mode, i as u32, 1, Phase::Steady);
            r.memory = Some(Memory {
                processes: vec![
                    process("worker", Some(1), uss),
                    process("child", None, 1),
                    process("worker", Some(0), uss + 1),
                    process("main", None, 100),
                ],
                ..Memory::default()
            });
            c.runs.push(r);
        }
        let m = memory_of(&c).unwrap();
        let roles: Vec<(&str, Option<u32>, Option<u64>)> = m
            .processes
            .iter()
            .map(|p| (p.role.as_str(), p.worker_id, p.uss_bytes))
            .collect();
        assert_eq!(
            roles,
            [
                ("main", None, Some(100)),
                ("worker", Some(0), Some(21)),
                ("worker", Some(1), Some(20)),
                ("child", None, Some(1)),
            ]
        );
        let mut none = Configuration::new("x", "x");
        none.runs
            .push(Run::new("r", TimingMode::WholeRun, 0, 1, Phase::Steady));
        assert_eq!(memory_of(&none), None);
    }
}
