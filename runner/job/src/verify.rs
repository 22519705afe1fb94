//! `--tune`'s recommendation (`shared`'s `tune_choice`: against the A/A
//! noise floor, the fastest configuration that measurably beats your
//! settings, or among those the fastest does not measurably beat the
//! cheapest) and its verification: your settings (A) and the pick (B)
//! re-run as interleaved whole-run pairs, each run a fresh process, by the
//! one driver, whose ascending / descending order makes the pairs AB, BA,
//! AB, ... The pairs' ratios (B ÷ A in samples/s) are judged against the
//! same floor. The figures go to the experiments' settings (`tune_*` on the
//! job, `ratio_*`, `pairs`, `pair_order` and `confirmed` on `job-verify`);
//! the words are `shared`'s `job_closing` of the bundle, so the report of
//! the bundle says exactly what the command said.

use serde_json::Value;
use stallscope_bundle::analysis::{
    JOB_SCRIPT_ID, Summary, change_of, fallback_pick, job_closing, job_noise_floor, pair_order,
    pair_ratios, tune_choice, verification_confirmed,
};
use stallscope_bundle::{Experiment, ExperimentKind, ParamValue, TimingMode};

use crate::grid::Point;
use crate::session::Session;
use crate::unit::{JobExperiment, JobPlan};

pub const ID: &str = stallscope_bundle::analysis::JOB_VERIFY_ID;

/// Choose from the job experiment (at `index`), verify a change, and store
/// the figures and the closing paragraphs.
pub fn recommend(s: &mut Session, plan: &JobPlan, pairs: u32, index: usize, job: &JobExperiment) {
    let e = s.bundle.experiments[index].clone();
    if let Some(choice) = tune_choice(&e, JOB_SCRIPT_ID, &[]) {
        let mut set = |k: &str, v: ParamValue| {
            s.bundle.experiments[index].settings.insert(k.into(), v);
        };
        set("tune_chosen", ParamValue::from(choice.chosen.id.as_str()));
        set("tune_fastest", ParamValue::from(choice.fastest.id.as_str()));
        set("tune_speedup", ParamValue::from(choice.speedup()));
        let change = change_of(&e, &choice.chosen.id);
        let stored = match (&change, choice.keep) {
            (Some(c), false) => {
                let confirmed = verify(s, plan, pairs, &e, &choice.chosen.id, job);
                match confirmed {
                    Some(false) => {
                        "none: keep your settings (the grid's pick was not confirmed)".into()
                    }
                    _ => c.clone(),
                }
            }
            _ => "none: keep your settings".to_string(),
        };
        s.bundle.experiments[index]
            .settings
            .insert("tune_change".into(), ParamValue::from(stored));
    } else if let Some(pick) = fallback_pick(&e).and_then(|c| change_of(&e, &c.id)) {
        // Your settings crashed: the fastest that ran, unverifiable against
        // settings that do not run here.
        s.bundle.experiments[index]
            .settings
            .insert("tune_change".into(), ParamValue::from(pick));
    }
    let text = job_closing(&s.bundle);
    s.bundle.experiments[index].settings.insert(
        "tune_recommendation".into(),
        ParamValue::from(text.join(" ")),
    );
    s.bundle
        .notes
        .push(format!("stallscope job --tune: {}", text.join(" ")));
    s.save();
}

/// Run the A/B pairs of the pick `chosen` and store their figures; whether
/// they confirm it (`None` when they did not run: a stop or a failure).
fn verify(
    s: &mut Session,
    plan: &JobPlan,
    pairs: u32,
    e: &Experiment,
    chosen: &str,
    job: &JobExperiment,
) -> Option<bool> {
    let ci = e.configurations.iter().position(|c| c.id == chosen)?;
    let label = e.configurations[ci].label.clone();
    let mut vjob = verify_job(plan, &label, job.overrides[ci].clone(), &e.swept);
    let vi = s.drive(&mut vjob, pairs)?;
    let ratios = pair_ratios(&s.bundle.experiments[vi], "original", "recommended");
    let sum = Summary::of(&ratios)?;
    let confirmed = verification_confirmed(&ratios, job_noise_floor(e).as_ref());
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
        .insert("pair_order".into(), ParamValue::from(pair_order(sum.n)));
    v.settings
        .insert("confirmed".into(), ParamValue::from(confirmed));
    Some(confirmed)
}

/// The verification experiment: your settings (A) and the pick (B),
/// whole-run only, one pair per repeat.
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
         samples/s (repeat i is pair i), judged against the job's A/A noise floor."
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
