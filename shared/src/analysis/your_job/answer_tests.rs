//! Tests of the job answer over the measured `--tune` fixture and edits of it.
use super::*;
use crate::read_bundle;

const JOB: &str = include_str!("../../../../fixtures/measured/cpu-job-tune.json");

fn fixture() -> Bundle {
    read_bundle(JOB.as_bytes()).expect("the job fixture reads")
}

fn set(b: &mut Bundle, experiment: &str, key: &str, v: ParamValue) {
    let e = b
        .experiments
        .iter_mut()
        .find(|e| e.id == experiment)
        .expect("experiment");
    e.settings.insert(key.into(), v);
}

#[test]
fn the_headline_says_direction_unit_and_mode() {
    let a = job_answer(&fixture()).expect("an answer");
    assert_eq!(
        a.headline.text,
        "2.07× more samples/s, whole-run, measured A/B"
    );
    assert_eq!(a.headline.direction, Some(Direction::More));
    assert!(
        a.headline.detail.contains("3 interleaved A/B pairs"),
        "{}",
        a.headline.detail
    );
    assert!(
        a.headline.detail.contains("1.92×–2.10×"),
        "{}",
        a.headline.detail
    );
}

#[test]
fn pairs_that_straddle_one_are_no_measurable_difference() {
    let mut b = fixture();
    set(&mut b, JOB_VERIFY_ID, "ratio_min", ParamValue::Float(0.97));
    set(
        &mut b,
        JOB_VERIFY_ID,
        "ratio_median",
        ParamValue::Float(1.01),
    );
    let a = job_answer(&b).unwrap();
    assert_eq!(a.headline.direction, Some(Direction::NoDifference));
    assert!(
        a.headline
            .text
            .starts_with("No measurable difference in samples/s, whole-run")
    );
    let mut b = fixture();
    for (k, x) in [
        ("ratio_min", 0.7),
        ("ratio_median", 0.8),
        ("ratio_max", 0.9),
    ] {
        set(&mut b, JOB_VERIFY_ID, k, ParamValue::Float(x));
    }
    let a = job_answer(&b).unwrap();
    assert_eq!(
        a.headline.text,
        "20% fewer samples/s (0.80×), whole-run, measured A/B"
    );
}

#[test]
fn without_pairs_the_grid_says_so() {
    let mut b = fixture();
    b.experiments.retain(|e| e.id != JOB_VERIFY_ID);
    let a = job_answer(&b).unwrap();
    assert_eq!(a.headline.basis, Basis::Grid);
    assert_eq!(
        a.headline.text,
        "2.19× more samples/s, whole-run, in the grid, not verified A/B"
    );
}

#[test]
fn the_memory_is_summed_over_main_and_workers() {
    let b = fixture();
    let a = job_answer(&b).unwrap();
    let m = a.memory.expect("memory before and after");
    let verify = b.experiment(JOB_VERIFY_ID).unwrap();
    let sum = |id: &str| -> (u64, u64) {
        let run = verify.configuration(id).unwrap().runs.last().unwrap();
        let p = &run.memory.as_ref().unwrap().processes;
        (
            p.iter().map(|p| p.rss_bytes.unwrap()).sum(),
            p.iter().map(|p| p.pss_bytes.unwrap()).sum(),
        )
    };
    assert_eq!((m.before.rss, m.before.pss.unwrap()), sum("original"));
    assert_eq!((m.after.rss, m.after.pss.unwrap()), sum("recommended"));
    assert_eq!((m.before.workers, m.after.workers), (0, 2));
    assert!(m.text().starts_with("PSS "), "{}", m.text());
    assert!(
        m.text().contains("RSS 562.1 MiB → 1.24 GiB"),
        "{}",
        m.text()
    );
}

#[test]
fn both_shares_and_why_they_differ() {
    let a = job_answer(&fixture()).unwrap();
    assert_eq!(a.shares.len(), 2, "your settings and the change's");
    let s = &a.shares[0];
    let (wait, replay) = (s.wait.unwrap(), s.by_replay.unwrap());
    assert!((0.85..0.95).contains(&wait), "{wait}");
    assert!(replay > 0.98, "{replay}");
    // The terminal's sentence (analysis::contention), word for word.
    let line = a.shares_differ.expect("a reason");
    assert_eq!(
        Some(&line),
        crate::analysis::contention::sentence(&fixture()).as_ref()
    );
    assert!(
        line.contains("With no worker processes nothing takes"),
        "{line}"
    );
}

#[test]
fn an_input_bound_change_gets_a_next_step() {
    let a = job_answer(&fixture()).unwrap();
    let next = a.next_step.expect("still input-bound after the change");
    assert!(
        next.starts_with("After the change the loop is still input-bound"),
        "{next}"
    );
    assert!(
        next.contains("2 workers already on this machine's 2 cores"),
        "{next}"
    );
    assert!(next.contains("__main__.SlowDataset"), "{next}");
}

/// The fixture with `script` run again, `f[r]` times as fast in repeat r.
fn with_script_again(f: [f64; 3]) -> Bundle {
    let mut b = fixture();
    let job = b.experiments.iter_mut().find(|e| e.id == JOB_ID).unwrap();
    let mut c = job.configuration(JOB_SCRIPT_ID).unwrap().clone();
    c.id = crate::analysis::noise::JOB_SCRIPT_AGAIN_ID.into();
    for r in &mut c.runs {
        if let Some(w) = &r.whole_run {
            let (s, n, steps) = (w.seconds.unwrap(), w.samples.unwrap(), w.steps.unwrap());
            let x = f[r.repeat as usize % 3];
            r.whole_run = Some(crate::format::WholeRun::measured(s / x, n, steps, 0));
        }
    }
    job.configurations.push(c);
    b
}

#[test]
fn the_verified_headline_is_judged_against_the_a_a_floor() {
    // A/A within 3%: the pairs' 1.92–2.10× clear it.
    let a = job_answer(&with_script_again([1.03, 0.985, 1.01])).unwrap();
    assert_eq!(
        a.headline.direction,
        Some(Direction::More),
        "{}",
        a.headline.text
    );
    // The same script 3× apart from itself: 2.07× is inside what it does alone.
    let a = job_answer(&with_script_again([3.0, 0.33, 1.0])).unwrap();
    assert_eq!(
        a.headline.direction,
        Some(Direction::NoDifference),
        "{}",
        a.headline.text
    );
}
