//! The comparison as read in a meeting: settings both sides state and that
//! differ one by one, the ones only one side states folded by name; and two
//! bundles of one job before and after: the diagnosis from the diagnostic
//! runs, the whole-run step against the noise of its repeats.

mod generated;

use std::collections::BTreeMap;

use generated::{Gen, merged_bundle};
use stallscope_bundle::analysis::*;
use stallscope_bundle::*;

fn bundle_with(experiment: Experiment) -> Bundle {
    let mut b = merged_bundle(1, Configuration::new("c", "c"));
    b.ranks.clear();
    b.experiments = vec![experiment];
    b
}

/// A pair of settings maps: each key in both (equal or not), or one only.
fn settings_pair(g: &mut Gen) -> (BTreeMap<String, ParamValue>, BTreeMap<String, ParamValue>) {
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    for k in 0..g.range(0, 30) {
        let key = format!("setting_{k:02}");
        let v = || ParamValue::from(format!("value {k}"));
        match g.below(4) {
            0 => {
                a.insert(key, v());
            }
            1 => {
                b.insert(key, v());
            }
            2 => {
                a.insert(key.clone(), v());
                b.insert(key, v());
            }
            _ => {
                a.insert(key.clone(), ParamValue::from(k as i64));
                b.insert(key, ParamValue::from(format!("{k} changed")));
            }
        }
    }
    (a, b)
}

fn with_settings(s: &BTreeMap<String, ParamValue>) -> Bundle {
    let mut e = Experiment::new("loader", ExperimentKind::Loader, "Loader");
    e.settings = s.clone();
    bundle_with(e)
}

#[test]
fn every_differing_setting_is_in_exactly_one_group() {
    let mut g = Gen(0x5EED_0019);
    for case in 0..300 {
        let (a, b) = settings_pair(&mut g);
        let c = compare_bundles(&with_settings(&a), &with_settings(&b), 5.0);
        let groups = c.experiments[0].settings();
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        let named = groups
            .both
            .iter()
            .map(|d| (d.field.as_str(), "both"))
            .chain(groups.only_base.iter().map(|f| (f.as_str(), "base")))
            .chain(groups.only_new.iter().map(|f| (f.as_str(), "new")));
        for (field, group) in named {
            assert!(
                seen.insert(field, group).is_none(),
                "case {case}: {field} twice"
            );
        }
        for key in a.keys().chain(b.keys()) {
            let want = match (a.get(key), b.get(key)) {
                (Some(x), Some(y)) if x.to_string() == y.to_string() => None,
                (Some(_), Some(_)) => Some("both"),
                (Some(_), None) => Some("base"),
                _ => Some("new"),
            };
            assert_eq!(seen.get(key.as_str()).copied(), want, "case {case}: {key}");
        }
        assert!(
            seen.keys()
                .all(|k| a.contains_key(*k) || b.contains_key(*k))
        );
        for d in &groups.both {
            assert_eq!(d.base, a[&d.field].to_string(), "case {case}");
            assert_eq!(d.new, b[&d.field].to_string(), "case {case}");
        }
        // One line per change, one per side that states something alone.
        let lines = groups.lines("BASE", "NEW", "settings");
        let folds =
            usize::from(!groups.only_base.is_empty()) + usize::from(!groups.only_new.is_empty());
        assert_eq!(lines.len(), groups.both.len() + folds, "case {case}");
        assert!(
            lines.iter().all(|l| !l.contains('—')),
            "case {case}: {lines:?}"
        );
    }
}

#[test]
fn a_published_side_states_no_machine_in_one_line() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let read = |p: &str| read_bundle(&std::fs::read(root.join(p)).unwrap()).unwrap();
    let published = read("published/pytorch-data-loading-tutorial.json");
    let measured = read("measured/cpu-reproduce-tutorial-quick.json");
    let c = compare_bundles(&published, &measured, 5.0);
    let m = c.machine();
    assert!(m.only_base.is_empty(), "{m:?}");
    assert!(m.only_new.iter().any(|f| f == "device"), "{m:?}");
    assert_eq!(
        m.both.iter().map(|d| d.field.as_str()).collect::<Vec<_>>(),
        ["provenance"]
    );
    let lines = m.lines("BASE", "NEW", "fields");
    assert_eq!(lines.len(), 2, "{lines:?}");
    let s = c.experiments[0].settings();
    assert!(s.both.iter().any(|d| d.field == "samples"), "{s:?}");
    let lines = s.lines("BASE", "NEW", "settings");
    assert!(lines.len() <= s.both.len() + 2, "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("only NEW states ")));
}

/// How one side of a job is generated.
struct Side {
    wait: f64,
    step_s: f64,
    /// Each repeat's step time is step_s × (1 + jitter × u), u in 0..1.
    jitter: f64,
    repeats: u32,
}

impl Side {
    fn draw(g: &mut Gen) -> Side {
        Side {
            wait: [0.01, 0.03, 0.1, 0.15, 0.4, 0.8][g.below(6) as usize],
            step_s: 0.005 + 0.2 * g.unit(),
            jitter: [0.0, 0.01, 0.05, 0.3][g.below(4) as usize],
            repeats: g.range(1, 4) as u32,
        }
    }
}

/// A job bundle: experiment `job`, configuration `script` (the baseline)
/// and a swept one, each repeat a whole-run and a diagnostic run.
fn job_bundle(g: &mut Gen, side: &Side) -> (Bundle, Vec<f64>) {
    let mut runs = Vec::new();
    let mut steps_s = Vec::new();
    for repeat in 0..side.repeats {
        let step = side.step_s * (1.0 + side.jitter * g.unit());
        steps_s.push(step);
        let n = 20;
        let wait_ns = (step * side.wait * 1e9) as u64;
        let series = StepSeries {
            next_wait_ns: vec![wait_ns; n],
            transfer_ns: vec![0; n],
            compute_ns: vec![(step * 1e9) as u64 - wait_ns; n],
            comm_ns: Vec::new(),
        };
        let mut d = Run::new(
            format!("d{repeat}"),
            TimingMode::Diagnostic,
            repeat,
            0,
            Phase::Steady,
        );
        d.diagnostic = Some(diagnostic_from_series(&series, step * 22.0, 640, 0, None));
        d.steps = Some(series);
        let mut w = Run::new(
            format!("w{repeat}"),
            TimingMode::WholeRun,
            repeat,
            0,
            Phase::Steady,
        );
        w.whole_run = Some(WholeRun::measured(step * n as f64, 640, n as u64, 0));
        runs.extend([d, w]);
    }
    let script = Configuration::new("script", "the script's own settings").with_runs(runs);
    let other = Configuration::new("num_workers=8", "num_workers 8");
    let e = Experiment::new(JOB_EXPERIMENT, ExperimentKind::Loader, "Your training job")
        .with_baseline("script")
        .with_configurations(vec![other, script]);
    (bundle_with(e), steps_s)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn spread(v: &[f64]) -> f64 {
    let max = v.iter().copied().fold(f64::MIN, f64::max);
    let min = v.iter().copied().fold(f64::MAX, f64::min);
    (max - min) / median(v)
}

#[test]
fn two_jobs_say_whether_the_diagnosis_changed_and_how_far_the_step_moved() {
    let mut g = Gen(0x5EED_0091);
    for case in 0..200 {
        let (sa, sb) = (Side::draw(&mut g), Side::draw(&mut g));
        let (a, steps_a) = job_bundle(&mut g, &sa);
        let (b, steps_b) = job_bundle(&mut g, &sb);
        let c = compare_bundles(&a, &b, 5.0);
        let ba = c.experiments[0].before_after.as_ref().expect("a job pair");
        let (da, db) = (ba.base.as_ref().unwrap(), ba.new.as_ref().unwrap());
        assert_eq!(
            da.config_id, "script",
            "case {case}: the job's own settings"
        );
        for (d, s) in [(da, &sa), (db, &sb)] {
            assert!((d.wait_share - s.wait).abs() < 1e-3, "case {case}: {d:?}");
            let want = match s.wait {
                w if w >= 0.2 => Bound::Input,
                w if w >= 0.05 => Bound::ModeratelyInput,
                _ => Bound::Compute,
            };
            assert_eq!(d.bound, want, "case {case}");
        }
        let step = ba.step.as_ref().unwrap();
        let ratio = median(&steps_b) / median(&steps_a);
        assert!((step.ratio - ratio).abs() < 1e-9 * ratio, "case {case}");
        let noise = spread(&steps_a).max(spread(&steps_b)).max(NOISE_FLOOR);
        assert!((step.noise - noise).abs() < 1e-9, "case {case}");
        let want = if ratio < 1.0 - noise {
            StepMove::Faster
        } else if ratio > 1.0 + noise {
            StepMove::Slower
        } else {
            StepMove::WithinNoise
        };
        assert_eq!(step.moved, want, "case {case}");
        let text = ba.sentences().join(" ");
        assert!(text.contains(da.bound.label()) && text.contains(db.bound.label()));
        assert_eq!(text.contains("unchanged"), da.bound == db.bound, "{text}");
        assert_eq!(
            text.contains("within the noise"),
            want == StepMove::WithinNoise
        );
        assert!(text.contains("Whole-run step (steady): "), "{text}");
    }
}

#[test]
fn the_sentences_read_as_the_issue_asks() {
    let mut g = Gen(1);
    let before = Side {
        wait: 0.62,
        step_s: 0.150,
        jitter: 0.1,
        repeats: 3,
    };
    let after = Side {
        wait: 0.03,
        step_s: 0.040,
        jitter: 0.05,
        repeats: 3,
    };
    let (a, _) = job_bundle(&mut g, &before);
    let (b, _) = job_bundle(&mut g, &after);
    let c = compare_bundles(&a, &b, 5.0);
    let s = c.experiments[0].before_after.as_ref().unwrap().sentences();
    assert!(
        s[0].ends_with(": input-bound (wait 62%) → compute-bound (wait 3.0%)."),
        "{s:?}"
    );
    assert!(
        s[1].contains(" faster; beyond the noise: repeats spread "),
        "{s:?}"
    );
    // Not a job: no before and after.
    let mut e = a.experiments[0].clone();
    e.id = "loader".into();
    let plain = bundle_with(e);
    let c = compare_bundles(&plain, &plain, 5.0);
    assert!(c.experiments[0].before_after.is_none());
}
