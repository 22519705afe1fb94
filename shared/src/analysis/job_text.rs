//! The closing paragraphs of a job's report, from the bundle alone: what
//! `stallscope job` prints at its end and `stallscope report` prints again,
//! the same text from the same function (docs/your-job.md). With `--tune`:
//! the recommendation as the change to make, what the grid measured against
//! the A/A noise floor, what the A/B verification says, and the replay's
//! ceiling; with `--replay` alone: the replay's sentence, reconciled with
//! the training thread's own wait (contention).

use crate::analysis::change::change_of;
use crate::analysis::noise::{
    RatioDifference, RatioVerdict, job_noise_floor, pair_order, ratio_interval,
    verification_confirmed,
};
use crate::analysis::tune::{TuneChoice, pair_ratios, tune_choice};
use crate::analysis::units::{group_thousands, show_percent, show_ratio};
use crate::analysis::your_job::{
    JOB_ID, JOB_SCRIPT_ID, JOB_VERIFY_ID, WAIT_METHOD_PARAM, WAIT_PARTIAL, WAIT_UNSEEN,
    replay_ceiling, replay_stall,
};
use crate::analysis::{contention, crashed, replay_text};
use crate::format::{Bundle, Experiment, ParamValue};

/// What the verification's pairs said.
struct Pairs {
    ratios: Vec<f64>,
    confirmed: bool,
}

/// The job's closing paragraphs (none for a bundle without a job).
pub fn job_closing(b: &Bundle) -> Vec<String> {
    let Some(e) = b.experiment(JOB_ID) else {
        return Vec::new();
    };
    let mut out: Vec<String> = wait_seen(e).into_iter().collect();
    out.extend(if e.settings.contains_key("tune_grid") {
        tune_text(b, e)
    } else {
        let mut out: Vec<String> = replay_text::sentence(b).into_iter().collect();
        out.extend(contention::sentence(b));
        out
    });
    out.extend(crate::analysis::forecast_text::forecast_line(e));
    out.extend(what_changed(b));
    out
}

/// Your settings' wait, when the training thread's batches came (in some
/// steps, or in all) through a path the hooks do not see.
fn wait_seen(e: &Experiment) -> Option<String> {
    let own = e.configuration(JOB_SCRIPT_ID)?;
    let path = "a path stallscope does not see (not a DataLoader call or a queue.Queue in the \
                training thread: a deque, a multiprocessing queue, a buffer of its own)";
    match own.params.get(WAIT_METHOD_PARAM) {
        Some(ParamValue::Text(m)) if m == WAIT_UNSEEN => Some(format!(
            "Not seen: your training thread's batches came through {path}, so no wait share is \
             given; the replay (the loop with the data free) measures the loader by difference."
        )),
        Some(ParamValue::Text(m)) if m == WAIT_PARTIAL => Some(format!(
            "Partly seen: in some steps your training thread's batches came through {path}; \
             their wait is not counted, so the wait share is a lower bound."
        )),
        _ => None,
    }
}

/// What stallscope or PyTorch changed of what the script asked (the
/// loaders' adjustments, a sweep point that was the script's own), from the
/// bundle's notes, so the report says it as the bundle does.
fn what_changed(b: &Bundle) -> Vec<String> {
    let said: Vec<&str> = b
        .notes
        .iter()
        .map(String::as_str)
        .filter(|n| n.contains(", in effect ") || n.contains("is what your script"))
        .collect();
    if said.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "Changed from what the script asked: {}.",
        said.join("; ")
    )]
}

fn tune_text(b: &Bundle, e: &Experiment) -> Vec<String> {
    let Some(choice) = tune_choice(e, JOB_SCRIPT_ID, &[]) else {
        return crashed::text(b, e).unwrap_or_else(|| {
            vec![
                "No recommendation: your settings have no whole-run figure (see their failure)."
                    .into(),
            ]
        });
    };
    let mut text = if choice.keep {
        keep(e, &choice)
    } else {
        change(b, e, &choice)
    };
    text.extend(replay_line(b, &choice));
    text
}

/// Keep: nothing beats your settings beyond the noise.
fn keep(e: &Experiment, c: &TuneChoice) -> Vec<String> {
    let head = if c.fastest.id == c.baseline.id {
        format!(
            "Keep your settings: no configuration of the grid is faster than yours ({}/s, \
             whole-run median).",
            n(c.baseline.rate.median)
        )
    } else {
        format!(
            "Keep your settings: nothing in the grid is measurably faster (the quickest, {}, \
             at {}/s against your {}/s: {}).",
            label(e, &c.fastest.id),
            n(c.fastest.rate.median),
            n(c.baseline.rate.median),
            against_floor(c.verdict.as_ref(), c.speedup_of_fastest())
        )
    };
    vec![head]
}

/// A change the grid picked, as the A/B pairs left it.
fn change(b: &Bundle, e: &Experiment, c: &TuneChoice) -> Vec<String> {
    let what = change_of(e, &c.chosen.id).unwrap_or_else(|| label(e, &c.chosen.id));
    let pairs = verification(b, e);
    let head = match &pairs {
        Some(p) if p.confirmed => format!("Recommendation: {what}"),
        Some(_) => format!(
            "Keep your settings: the grid's pick, {what}, did not hold up in the A/B pairs."
        ),
        None => format!("Recommendation (not verified): {what}"),
    };
    let mut text = vec![head, grid_sentence(e, c)];
    text.push(match &pairs {
        Some(p) => verified_sentence(p, e),
        None => "Not verified: the A/B pairs did not run (a stop or a failure).".into(),
    });
    text
}

/// The verification's pairs, when they stored a verdict.
fn verification(b: &Bundle, e: &Experiment) -> Option<Pairs> {
    let v = b
        .experiment(JOB_VERIFY_ID)
        .filter(|v| v.settings.contains_key("confirmed"))?;
    let ratios = pair_ratios(v, "original", "recommended");
    let confirmed = verification_confirmed(&ratios, job_noise_floor(e).as_ref());
    (!ratios.is_empty()).then_some(Pairs { ratios, confirmed })
}

/// What the grid measured for the pick, against the floor, with its CPU.
fn grid_sentence(e: &Experiment, c: &TuneChoice) -> String {
    let repeats = match c.baseline.rate.n {
        1 => "one repeat".to_string(),
        k => format!("medians over {k} repeats"),
    };
    let mut s = format!(
        "In the grid: {} the whole-run samples/s of yours ({}/s against {}/s, {repeats}; {})",
        show_ratio(c.speedup()),
        n(c.chosen.rate.median),
        n(c.baseline.rate.median),
        against_floor(c.verdict.as_ref(), c.speedup())
    );
    if let Some(v) = &c.cpu_verdict {
        s += &format!(
            "; {} the CPU-seconds per sample ({}, {})",
            show_ratio(v.interval.median),
            interval(v),
            v.difference.cost_word()
        );
    }
    if c.near.len() > 1 {
        let near: Vec<String> = c.near.iter().map(|id| label(e, id)).collect();
        s += &format!(
            ". Not measurably slower than the quickest: {}; the pick is the cheapest of them by \
             CPU-seconds per sample, then peak memory",
            near.join("; ")
        );
    }
    s + "."
}

/// `interval 1.92–2.10× over 3 repeats, beyond the 3.1% noise floor`, or
/// the spread rule for bundles without an A/A pair.
fn against_floor(v: Option<&RatioVerdict>, ratio: f64) -> String {
    match v {
        Some(v) => {
            let floor = show_percent(v.floor);
            match v.difference {
                RatioDifference::NoMeasurableDifference => {
                    format!(
                        "{}; no measurable difference within the {floor} noise floor",
                        interval(v)
                    )
                }
                _ => format!("{}, beyond the {floor} noise floor", interval(v)),
            }
        }
        None => format!(
            "{} judged by the spread of the repeats: no A/A pair in this bundle",
            show_ratio(ratio)
        ),
    }
}

fn interval(v: &RatioVerdict) -> String {
    format!(
        "interval {}–{} over {} repeat{}",
        show_ratio(v.interval.low),
        show_ratio(v.interval.high),
        v.interval.n,
        if v.interval.n == 1 { "" } else { "s" }
    )
}

/// The pairs' verdict.
fn verified_sentence(p: &Pairs, e: &Experiment) -> String {
    let Some(i) = ratio_interval(&p.ratios) else {
        return "Not verified: the A/B pairs gave no ratio.".into();
    };
    let min = p.ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = p.ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let floor = job_noise_floor(e).map_or_else(
        || "by every pair being faster (no A/A pair in this bundle)".to_string(),
        |f| format!("against the {} noise floor", show_percent(f.rate_floor)),
    );
    let how = format!(
        "median of {} interleaved whole-run A/B pairs, each run a fresh process, in the order {}; \
         pairs {}–{}; judged {floor}",
        i.n,
        pair_order(i.n),
        show_ratio(min),
        show_ratio(max)
    );
    if p.confirmed {
        format!(
            "Verified: {} more samples/s, whole-run, measured A/B ({how}).",
            show_ratio(i.median)
        )
    } else {
        format!(
            "Not confirmed: {} the samples/s, whole-run, measured A/B ({how}); verify again with \
             more --verify-pairs, or on a quieter machine.",
            show_ratio(i.median)
        )
    }
}

/// The replay's sentence with what the recommendation leaves of the stall.
fn replay_line(b: &Bundle, c: &TuneChoice) -> Vec<String> {
    let (Some(line), Some(ceiling)) = (replay_text::sentence(b), replay_ceiling(b)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if c.keep {
        out.push(line);
    } else {
        let stall = show_percent(replay_stall(c.chosen.rate.median, &ceiling));
        out.push(format!("{line} With the pick it costs {stall}."));
    }
    out.extend(contention::sentence(b));
    out
}

fn label(e: &Experiment, id: &str) -> String {
    e.configuration(id)
        .map_or(id.to_string(), |c| c.label.clone())
}

/// A rate as a whole number with thousands separators.
fn n(x: f64) -> String {
    group_thousands(&format!("{x:.0}"))
}

impl TuneChoice {
    /// The quickest configuration's median samples/s over the baseline's.
    fn speedup_of_fastest(&self) -> f64 {
        self.fastest.rate.median / self.baseline.rate.median
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Configuration;

    #[test]
    fn the_change_names_only_what_differs_from_yours() {
        let mut e = Experiment::new(JOB_ID, crate::format::ExperimentKind::Loader, "job");
        e.swept = vec![
            "num_workers".into(),
            "persistent_workers".into(),
            "pin_memory".into(),
        ];
        e.configurations = vec![
            Configuration::new(JOB_SCRIPT_ID, "your settings")
                .with_param("num_workers", 0)
                .with_param("persistent_workers", false)
                .with_param("pin_memory", true),
            Configuration::new("w2", "num_workers=2, persistent_workers=true")
                .with_param("num_workers", 2)
                .with_param("persistent_workers", true)
                .with_param("pin_memory", true),
        ];
        assert_eq!(
            change_of(&e, "w2").as_deref(),
            Some("DataLoader(..., num_workers=2, persistent_workers=True)")
        );
        assert_eq!(change_of(&e, JOB_SCRIPT_ID), None, "yours is no change");
    }
}
