//! Validation of the format 1.2 fields over generated merged bundles: every
//! generated bundle validates as written, and each way of breaking one field
//! (comm series, ranks, CPU cost, timeline) gives a problem located at that
//! field, the rest of the bundle still checked.

mod generated;

use generated::*;
use stallscope_bundle::*;

fn bundle(g: &mut Gen) -> (Bundle, Plan) {
    let plan = Plan::draw(g);
    let mut runs = ranked_runs(g, &plan);
    for r in runs
        .iter_mut()
        .filter(|r| r.timing_mode == TimingMode::WholeRun)
    {
        if g.below(2) == 0 {
            let (n, util) = (g.range(1, 40) as usize, g.below(101) as u32);
            r.timeline = Some(timeline(g, n, util));
        }
    }
    let c = Configuration::new("c", "c").with_runs(runs);
    (merged_bundle(plan.ranks, c), plan)
}

fn paths(b: &Bundle) -> Vec<String> {
    validate(b).into_iter().map(|p| p.path).collect()
}

const RUNS: &str = "$.experiments[0].configurations[0].runs";

#[test]
fn generated_merged_bundles_validate_and_round_trip() {
    let mut g = Gen(0x5EED_0020);
    for case in 0..100 {
        let (b, _) = bundle(&mut g);
        assert_eq!(validate(&b), vec![], "case {case}");
        let again = read_bundle(b.to_json_pretty().as_bytes()).unwrap();
        assert_eq!(again, b, "case {case}");
    }
}

/// A run of the bundle picked by the generator: (index, mutable run).
fn pick<'a>(g: &mut Gen, b: &'a mut Bundle, mode: TimingMode) -> (usize, &'a mut Run) {
    let runs = &mut b.experiments[0].configurations[0].runs;
    let idx: Vec<usize> = (0..runs.len())
        .filter(|&i| runs[i].timing_mode == mode)
        .collect();
    let i = idx[g.below(idx.len() as u64) as usize];
    (i, &mut runs[i])
}

#[test]
fn each_broken_field_is_located() {
    let mut g = Gen(0x5EED_0021);
    for case in 0..200 {
        let (mut b, plan) = bundle(&mut g);
        let kind = g.below(10);
        let expect: String = match kind {
            0 => {
                let (i, r) = pick(&mut g, &mut b, TimingMode::Diagnostic);
                r.steps.as_mut().unwrap().comm_ns.pop();
                format!("{RUNS}[{i}].steps.comm_ns")
            }
            1 => {
                let (i, r) = pick(&mut g, &mut b, TimingMode::Diagnostic);
                r.rank = Some(plan.ranks + g.below(5) as u32);
                format!("{RUNS}[{i}].rank")
            }
            2 => {
                let j = g.below(plan.ranks as u64 - 1) as usize;
                b.ranks[j + 1].rank = b.ranks[j].rank;
                b.ranks[j + 1].layout.rank = b.ranks[j].rank;
                format!("$.ranks[{}].rank", j + 1)
            }
            3 => {
                let (i, r) = pick(&mut g, &mut b, TimingMode::WholeRun);
                let c = r.cost.as_mut().unwrap();
                c.cpu_s_per_1000_samples = Some(c.cpu_s_per_1000_samples.unwrap() * 1.5);
                format!("{RUNS}[{i}].cost.cpu_s_per_1000_samples")
            }
            4 => {
                let (i, r) = pick(&mut g, &mut b, TimingMode::WholeRun);
                let c = r.cost.as_mut().unwrap();
                let bad = *[f64::NAN, -1.0, f64::INFINITY]
                    .get(g.below(3) as usize)
                    .unwrap();
                c.parts[0].user_s = bad;
                format!("{RUNS}[{i}].cost.parts[0].user_s")
            }
            5 => {
                let (i, r) = pick(&mut g, &mut b, TimingMode::WholeRun);
                let n = 2 + g.below(20) as usize;
                let mut t = timeline(&mut g, n, 50);
                t.host_rss_bytes.pop();
                r.timeline = Some(t);
                format!("{RUNS}[{i}].timeline.host_rss_bytes")
            }
            6 => {
                let (i, r) = pick(&mut g, &mut b, TimingMode::WholeRun);
                let n = 3 + g.below(20) as usize;
                let mut t = timeline(&mut g, n, 50);
                let k = 1 + g.below(n as u64 - 1) as usize;
                t.t_ms[k] = t.t_ms[k - 1] - 1;
                r.timeline = Some(t);
                format!("{RUNS}[{i}].timeline.t_ms[{k}]")
            }
            7 => {
                let (i, r) = pick(&mut g, &mut b, TimingMode::WholeRun);
                let n = 2 + g.below(20) as usize;
                let mut t = timeline(&mut g, n, 50);
                t.gpu.as_mut().unwrap().memory_used_bytes.push(1);
                r.timeline = Some(t);
                format!("{RUNS}[{i}].timeline.gpu.memory_used_bytes")
            }
            8 => {
                b.ranks.clear();
                // Every run's rank is now unlisted; the first names itself.
                format!("{RUNS}[0].rank")
            }
            _ => {
                let j = g.below(plan.ranks as u64) as usize;
                b.ranks[j].layout.rank = b.ranks[j].layout.world_size;
                format!("$.ranks[{j}].layout.rank")
            }
        };
        let found = paths(&b);
        assert!(
            found.contains(&expect),
            "case {case} kind {kind}: {expect} not in {found:#?}"
        );
        // Each problem reads as one located sentence.
        for p in validate(&b) {
            let text = p.to_string();
            assert!(
                text.starts_with("at $") && text.contains("; expected "),
                "{text}"
            );
        }
    }
}

#[test]
fn a_single_process_bundle_may_not_carry_run_ranks_but_may_carry_its_layout() {
    let mut g = Gen(0x5EED_0022);
    let (mut b, _) = bundle(&mut g);
    b.ranks.clear();
    for r in &mut b.experiments[0].configurations[0].runs {
        r.rank = None;
        if let Some(s) = &mut r.steps {
            s.comm_ns.clear();
        }
    }
    b.environment.rank = Some(layout(1, 2));
    assert_eq!(validate(&b), vec![]);
    b.environment.rank.as_mut().unwrap().local_world_size = Some(3);
    assert_eq!(paths(&b), ["$.environment.rank.local_rank"]);
}

#[test]
fn a_comm_timeout_names_ranks_the_bundle_lists() {
    let mut g = Gen(0x5EED_0023);
    let (mut b, plan) = bundle(&mut g);
    let c = &mut b.experiments[0].configurations[0];
    c.failure = Some(Failure::CommTimeout {
        operation: "barrier at step 41 of epoch 1".into(),
        timeout_s: Some(300.0),
        missing_ranks: vec![plan.ranks - 1],
        message: "rank did not arrive".into(),
    });
    assert_eq!(validate(&b), vec![]);
    if let Some(Failure::CommTimeout {
        missing_ranks,
        timeout_s,
        ..
    }) = &mut b.experiments[0].configurations[0].failure
    {
        missing_ranks.push(plan.ranks + 3);
        *timeout_s = Some(-1.0);
    }
    let f = "$.experiments[0].configurations[0].failure";
    assert_eq!(
        paths(&b),
        [format!("{f}.timeout_s"), format!("{f}.missing_ranks")]
    );
}
