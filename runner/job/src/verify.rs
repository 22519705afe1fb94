//! `--tune`'s recommendation (`shared`'s `tune_choice`: the fastest
//! whole-run configuration, or among those within its noise the cheapest)
//! and its verification: the job's own settings (A) and the recommendation
//! (B) re-run as interleaved whole-run pairs, each run a fresh process, by
//! the one driver, whose ascending / descending order makes the pairs AB,
//! BA, AB, ... The ratio of each pair is B ÷ A in samples/s; the median and
//! the range of the pair ratios are the verified speed-up. The text goes to
//! the job experiment's settings (`tune_*`), the bundle's notes and the
//! report; the pairs are the experiment `job-verify`.

use serde_json::Value;
use stallscope_bundle::analysis::{
    InputBound, NOISE_THRESHOLD, Summary, TuneChoice, group_thousands, pair_ratios, show_bytes,
    show_percent, show_ratio, tune_choice,
};
use stallscope_bundle::{Experiment, ExperimentKind, ParamValue, TimingMode};

use crate::grid::Point;
use crate::replay;
use crate::session::Session;
use crate::tune;
use crate::unit::{JobExperiment, JobPlan};

pub const ID: &str = stallscope_bundle::analysis::JOB_VERIFY_ID;

/// Choose from the job experiment (at `index`), verify a change, store
/// and return the recommendation's paragraphs.
pub fn recommend(
    s: &mut Session,
    plan: &JobPlan,
    pairs: u32,
    index: usize,
    job: &JobExperiment,
) -> Vec<String> {
    let e = s.bundle.experiments[index].clone();
    let Some(choice) = tune_choice(&e, "script", &[]) else {
        let text = vec![
            "No recommendation: the script's own settings have no whole-run figure (see their \
             failure)."
                .to_string(),
        ];
        store(s, index, &text, None, None);
        return text;
    };
    if choice.keep {
        let text = keep(s, &e, &choice);
        store(
            s,
            index,
            &text,
            Some((&choice, "none: keep your settings")),
            None,
        );
        return text;
    }
    let ci = e
        .configurations
        .iter()
        .position(|c| c.id == choice.chosen.id);
    let overrides = ci.map_or(Value::Null, |i| job.overrides[i].clone());
    let script = job.seen.lock().unwrap_or_else(|x| x.into_inner())[0].clone();
    let change = tune::change(&overrides, script.as_ref().unwrap_or(&Value::Null));
    let mut vjob = verify_job(plan, &label(&e, &choice.chosen.id), overrides, &e.swept);
    let verified = s.drive(&mut vjob, pairs).and_then(|vi| {
        let ratios = pair_ratios(&s.bundle.experiments[vi], "original", "recommended");
        Some((vi, Summary::of(&ratios)?))
    });
    let (text, stored) = change_text(s, &e, &choice, &change, verified.as_ref().map(|v| &v.1));
    store(s, index, &text, Some((&choice, &stored)), verified);
    text
}

/// A change the grid picked, as the A/B pairs left it: the paragraphs, and
/// the change to store (none when the pairs did not confirm it).
fn change_text(
    s: &Session,
    e: &Experiment,
    choice: &TuneChoice,
    change: &str,
    verified: Option<&Summary>,
) -> (Vec<String>, String) {
    let (head, stored) = match verified {
        Some(sum) if sum.min > 1.0 => (format!("Recommendation: {change}"), change.to_string()),
        Some(_) => (
            format!(
                "Keep your settings: the grid's pick, {change}, did not hold up in the A/B pairs."
            ),
            "none: keep your settings (the grid's pick was not confirmed)".to_string(),
        ),
        None => (
            format!("Recommendation (not verified): {change}"),
            change.to_string(),
        ),
    };
    let mut text = vec![head, grid_sentence(e, choice)];
    text.push(match verified {
        Some(sum) => verified_sentence(sum),
        None => "Not verified: the A/B pairs did not run (a stop or a failure).".into(),
    });
    if let (Some(line), Some(c)) = (replay::sentence(&s.bundle), replay::ceiling(&s.bundle)) {
        let stall = show_percent(replay::stall(choice.chosen.rate.median, &c));
        text.push(format!("{line} With the grid's pick it costs {stall}."));
    }
    (text, stored)
}

/// Keep: nothing beats the script's settings beyond the noise; the replay
/// says whether the job is compute-bound.
fn keep(s: &Session, e: &Experiment, c: &TuneChoice) -> Vec<String> {
    let mut text = vec![if c.fastest.id == c.baseline.id {
        format!(
            "Keep your settings: they are the fastest of the grid ({} samples/s, whole-run \
             median).",
            n(c.baseline.rate.median)
        )
    } else {
        format!(
            "Keep your settings: nothing in the grid beats them beyond the noise (the fastest, \
             {}, at {} samples/s against your {}/s, {}, is within {}).",
            label(e, &c.fastest.id),
            n(c.fastest.rate.median),
            n(c.baseline.rate.median),
            show_ratio(c.fastest.rate.median / c.baseline.rate.median),
            NOISE_RULE
        )
    }];
    let spread = c.fastest.rate.spread.max(c.baseline.rate.spread);
    let noisy = spread > NOISE_THRESHOLD;
    if noisy {
        text.push(format!(
            "The repeats disagree widely (spreads up to {}): a longer window (--steps) or a \
             quieter machine would tell the settings apart.",
            show_percent(spread)
        ));
    }
    let (Some(line), Some(ceiling)) = (replay::sentence(&s.bundle), replay::ceiling(&s.bundle))
    else {
        return text;
    };
    let verdict = match InputBound::of_share(replay::stall(c.baseline.rate.median, &ceiling)) {
        InputBound::Not => "The job is compute-bound.",
        InputBound::Moderately => "The job is moderately input-bound.",
        InputBound::Highly if noisy => "The job is input-bound.",
        InputBound::Highly => {
            "The job is input-bound, and no loader setting of the grid helps: the Dataset's own \
             work (or its collate) must get cheaper."
        }
    };
    text.push(format!("{verdict} {line}"));
    text
}

/// A rate as a whole number with thousands separators.
fn n(x: f64) -> String {
    group_thousands(&format!("{x:.0}"))
}

/// How "within the noise" is decided (`shared`'s `within_noise`).
const NOISE_RULE: &str = "the noise (a median at least the fastest's × (1 − the larger spread of \
                          the two over the repeats, 2% at least))";

fn label(e: &Experiment, id: &str) -> String {
    e.configuration(id)
        .map_or(id.to_string(), |c| c.label.clone())
}

/// What the grid measured for the recommendation, and why it was chosen.
fn grid_sentence(e: &Experiment, c: &TuneChoice) -> String {
    let repeats = match c.baseline.rate.n {
        1 => "one repeat".to_string(),
        n => format!("medians over {n} repeats"),
    };
    let head = format!(
        "In the grid: {} the whole-run samples/s of your settings ({}/s against {}/s, \
         {repeats});",
        show_ratio(c.speedup()),
        n(c.chosen.rate.median),
        n(c.baseline.rate.median),
    );
    if c.near.len() == 1 {
        return format!("{head} the fastest, and nothing else is within {NOISE_RULE}.");
    }
    let near: Vec<String> = c.near.iter().map(|id| label(e, id)).collect();
    let cost = match (c.chosen.cpu_s_per_1000_samples, c.chosen.peak_rss_bytes) {
        (Some(cpu), Some(rss)) => {
            format!(": {cpu:.3} CPU-s per 1,000 samples, {}", show_bytes(rss))
        }
        (Some(cpu), None) => format!(": {cpu:.3} CPU-s per 1,000 samples"),
        _ => String::new(),
    };
    format!(
        "{head} within {NOISE_RULE} of the fastest ({}, {}/s): {}. The recommendation is the \
         cheapest of them by CPU-seconds per 1,000 samples, then peak memory{cost}.",
        label(e, &c.fastest.id),
        n(c.fastest.rate.median),
        near.join("; "),
    )
}

/// The pairs' verdict: confirmed when every pair was faster.
fn verified_sentence(s: &Summary) -> String {
    let how = format!(
        "median of {} interleaved whole-run A/B pairs, each run a fresh process, in the order {}; \
         pairs {}–{}",
        s.n,
        order(s.n),
        show_ratio(s.min),
        show_ratio(s.max)
    );
    if s.min > 1.0 {
        format!("Verified: {} ({how}).", show_ratio(s.median))
    } else {
        format!(
            "Not confirmed: {} ({how}); not every pair was faster (verify again with more \
             --verify-pairs, on a quieter machine).",
            show_ratio(s.median)
        )
    }
}

/// AB, BA, AB, ...: the driver's ascending / descending order of 2.
fn order(pairs: usize) -> String {
    let v: Vec<&str> = (0..pairs)
        .map(|i| if i % 2 == 0 { "AB" } else { "BA" })
        .collect();
    v.join(", ")
}

/// The verification experiment: your settings (A) and the recommendation
/// (B), whole-run only, one pair per repeat.
fn verify_job(plan: &JobPlan, label: &str, overrides: Value, swept: &[String]) -> JobExperiment {
    let mut plan = plan.clone();
    plan.work = plan.work.join(ID);
    let points = [
        Point {
            id: "original".into(),
            label: "A: your settings".into(),
            overrides: serde_json::json!({}),
        },
        Point {
            id: "recommended".into(),
            label: format!("B: {label}"),
            overrides,
        },
    ];
    let mut e = Experiment::new(
        ID,
        ExperimentKind::Loader,
        "Verification: your settings (A) against the recommendation (B)",
    );
    e.description = Some(
        "Your settings (A) and the recommendation (B) re-run as interleaved whole-run pairs, each \
         run a fresh process, in the order AB, BA, AB, ...; each pair's ratio is B ÷ A in \
         samples/s (repeat i is pair i)."
            .into(),
    );
    e.swept = swept.to_vec();
    e.baseline = Some("original".into());
    e.configurations = points.iter().map(Point::configuration).collect();
    let overrides = points.iter().map(|p| p.overrides.clone()).collect();
    let mut job = JobExperiment::new(plan, e, overrides);
    job.modes = vec![TimingMode::WholeRun];
    job
}

/// The recommendation into the job experiment's settings (`tune_*`) and
/// the bundle's notes; the verification's figures into its own
/// experiment's settings.
fn store(
    s: &mut Session,
    index: usize,
    text: &[String],
    choice: Option<(&TuneChoice, &str)>,
    verified: Option<(usize, Summary)>,
) {
    let e = &mut s.bundle.experiments[index];
    let mut set = |k: &str, v: ParamValue| e.settings.insert(k.into(), v);
    set("tune_recommendation", ParamValue::from(text.join(" ")));
    if let Some((c, change)) = choice {
        set("tune_change", ParamValue::from(change));
        set("tune_chosen", ParamValue::from(c.chosen.id.as_str()));
        set("tune_fastest", ParamValue::from(c.fastest.id.as_str()));
        set("tune_speedup", ParamValue::from(c.speedup()));
    }
    if let Some((vi, sum)) = verified {
        let v = &mut s.bundle.experiments[vi];
        for (k, x) in [
            ("ratio_median", sum.median),
            ("ratio_min", sum.min),
            ("ratio_max", sum.max),
        ] {
            v.settings.insert(k.into(), ParamValue::from(x));
        }
        v.settings
            .insert("pairs".into(), ParamValue::from(sum.n as i64));
        v.settings
            .insert("pair_order".into(), ParamValue::from(order(sum.n)));
        v.settings
            .insert("confirmed".into(), ParamValue::from(sum.min > 1.0));
    }
    s.bundle
        .notes
        .push(format!("stallscope job --tune: {}", text.join(" ")));
    s.save();
}
