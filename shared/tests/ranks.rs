//! Property tests of the per-rank analysis over generated merged bundles:
//! a rank slowed by a known delay is the straggler in (nearly) every step
//! and the verdict names it and its stage; shares sum to 1; imbalance ≥ 1;
//! the order of the runs does not matter; one rank is trivial; ranks with
//! different step counts are compared on the common prefix and say so.

mod generated;

use generated::*;
use stallscope_bundle::analysis::*;
use stallscope_bundle::*;

fn config(runs: Vec<Run>) -> Configuration {
    Configuration::new("w2", "2 workers")
        .with_param("workers", 2)
        .with_runs(runs)
}

#[test]
fn a_slowed_rank_is_the_straggler_in_nearly_every_step() {
    let mut g = Gen(0x5EED_0012);
    for case in 0..120 {
        let plan = Plan::draw(&mut g);
        let (slow, _, stage) = plan.slowed.unwrap();
        let c = config(ranked_runs(&mut g, &plan));
        let b = merged_bundle(plan.ranks, c.clone());
        let a = rank_analysis_in(&b, &c).unwrap_or_else(|| panic!("case {case}: no analysis"));
        let ctx = format!("case {case} {plan:?}: {a:#?}");
        // Steady epochs only (epoch 0 is cold), aligned across every rank.
        let steady = (plan.repeats * (plan.epochs - 1)) as u64 * plan.steps as u64;
        assert_eq!(a.phase, Phase::Steady, "{ctx}");
        assert_eq!(a.steps_compared, steady, "{ctx}");
        assert_eq!(a.ranks.len(), plan.ranks as usize, "{ctx}");
        let s = &a.ranks[slow as usize];
        assert_eq!(s.rank, slow);
        assert!(s.straggler_steps as f64 >= 0.95 * steady as f64, "{ctx}");
        assert_eq!(a.stragglers[0].0, slow, "{ctx}");
        let v = a.verdict.as_deref().unwrap();
        let what = match stage {
            Slow::Data => "waited for data",
            Slow::Compute => "of its step time computing",
        };
        assert!(
            v.starts_with(&format!("Rank {slow} ")) && v.contains(what),
            "{ctx}"
        );
        assert!(v.contains("in the barrier waiting for it"), "{ctx}");
        // The others waited in comm; the slowed rank hardly.
        for r in &a.ranks {
            if r.rank != slow {
                assert!(r.comm_share.unwrap() > s.comm_share.unwrap(), "{ctx}");
            }
        }
        // Work per step is 2.15–3.7 ms drawn, plus the delay on the slowed
        // rank: the slowest over the others' median is within those bounds.
        let (delay, w) = (plan.slowed.unwrap().1 as f64, a.work_imbalance.unwrap());
        let (lo, hi) = ((2.15e6 + delay) / 3.7e6, (3.7e6 + delay) / 2.15e6);
        assert!(w >= lo && w <= hi, "{w} not in {lo}..{hi}: {ctx}");
    }
}

#[test]
fn shares_sum_to_one_and_imbalance_is_at_least_one() {
    let mut g = Gen(0x5EED_0013);
    for case in 0..150 {
        let mut plan = Plan::draw(&mut g);
        if g.below(3) == 0 {
            plan.slowed = None;
        }
        let c = config(ranked_runs(&mut g, &plan));
        let a = rank_analysis(&c).unwrap();
        for r in &a.ranks {
            let sum = r.next_wait_share.unwrap()
                + r.transfer_share.unwrap()
                + r.compute_share.unwrap()
                + r.comm_share.unwrap();
            assert!(
                (sum - 1.0).abs() < 1e-9,
                "case {case}: rank {} sums to {sum}",
                r.rank
            );
            let share = r.straggler_share.unwrap();
            assert!((0.0..=1.0).contains(&share), "case {case}");
            assert!(r.samples_per_s.unwrap() > 0.0, "case {case}");
        }
        // Whole-run step times exist for every rank: the imbalance is theirs.
        assert_eq!(a.step_mode, Some(TimingMode::WholeRun), "case {case}");
        assert!(
            a.imbalance.unwrap() >= 1.0,
            "case {case}: {:?}",
            a.imbalance
        );
        assert!(a.work_imbalance.unwrap() >= 1.0, "case {case}");
        let counted: u64 = a.stragglers.iter().map(|s| s.1).sum();
        assert!(counted <= a.steps_compared, "case {case}");
    }
}

#[test]
fn balanced_ranks_name_no_one_rank() {
    let mut g = Gen(0x5EED_0014);
    let mut judged = 0;
    for case in 0..60 {
        let mut plan = Plan::draw(&mut g);
        plan.slowed = None;
        let c = config(ranked_runs(&mut g, &plan));
        let a = rank_analysis(&c).unwrap();
        let v = a.verdict.as_deref().unwrap();
        // Every rank's work is drawn alike: with three ranks or more and
        // enough steps, none is the straggler in most of them.
        if plan.ranks >= 3 && a.steps_compared >= 40 {
            judged += 1;
            assert!(
                v.starts_with("No one rank held the others back")
                    || v.starts_with("The ranks kept pace"),
                "case {case}: {v}"
            );
            assert!(v.contains("per-step synchronisation"), "{v}");
        }
    }
    assert!(judged > 10, "{judged}");
}

#[test]
fn the_order_of_the_runs_does_not_change_the_answer() {
    let mut g = Gen(0x5EED_0015);
    for case in 0..80 {
        let plan = Plan::draw(&mut g);
        let runs = ranked_runs(&mut g, &plan);
        let a = rank_analysis(&config(runs.clone())).unwrap();
        let mut shuffled = runs;
        g.shuffle(&mut shuffled);
        assert_eq!(rank_analysis(&config(shuffled)).unwrap(), a, "case {case}");
    }
}

#[test]
fn one_rank_is_trivial_and_no_rank_is_none() {
    let mut g = Gen(0x5EED_0016);
    let mut plan = Plan::draw(&mut g);
    plan.ranks = 1;
    plan.slowed = Some((0, 5_000_000, Slow::Data));
    let runs = ranked_runs(&mut g, &plan);
    let a = rank_analysis(&config(runs.clone())).unwrap();
    assert_eq!(a.ranks.len(), 1);
    assert_eq!(
        (a.imbalance, a.work_imbalance, a.verdict.as_deref()),
        (None, None, None)
    );
    assert!(a.stragglers.is_empty() && a.steps_compared == 0, "{a:#?}");
    let unranked: Vec<Run> = runs
        .into_iter()
        .map(|mut r| {
            r.rank = None;
            r
        })
        .collect();
    assert_eq!(rank_analysis(&config(unranked)), None);
    assert_eq!(rank_analysis(&config(vec![])), None);
}

#[test]
fn different_step_counts_are_compared_on_the_common_prefix() {
    let mut g = Gen(0x5EED_0017);
    for case in 0..60 {
        let plan = Plan::draw(&mut g);
        let mut runs = ranked_runs(&mut g, &plan);
        // Cut one steady diagnostic epoch of one rank short by `cut` steps.
        let cut = 1 + g.below(plan.steps as u64 - 1) as usize;
        let victim = runs
            .iter_mut()
            .find(|r| r.timing_mode == TimingMode::Diagnostic && r.epoch == 1 && r.rank == Some(0))
            .unwrap();
        let s = victim.steps.as_mut().unwrap();
        let keep = plan.steps - cut;
        for v in [
            &mut s.next_wait_ns,
            &mut s.transfer_ns,
            &mut s.compute_ns,
            &mut s.comm_ns,
        ] {
            v.truncate(keep);
        }
        let a = rank_analysis(&config(runs)).unwrap();
        let full = (plan.repeats * (plan.epochs - 1)) as u64 * plan.steps as u64;
        assert_eq!(a.steps_compared, full - cut as u64, "case {case}");
        assert!(
            a.notes
                .iter()
                .any(|n| n.contains("compared on the steps all of them have")
                    && n.contains(&format!("{keep} of {keep}–{}", plan.steps))),
            "case {case}: {:?}",
            a.notes
        );
    }
}

#[test]
fn an_epoch_one_rank_lacks_is_left_out_and_said() {
    let mut g = Gen(0x5EED_0018);
    let plan = Plan::draw(&mut g);
    let mut runs = ranked_runs(&mut g, &plan);
    runs.retain(|r| {
        !(r.rank == Some(1)
            && r.epoch == 1
            && r.repeat == 0
            && r.timing_mode == TimingMode::Diagnostic)
    });
    let a = rank_analysis(&config(runs)).unwrap();
    let full = (plan.repeats * (plan.epochs - 1)) as u64 * plan.steps as u64;
    assert_eq!(a.steps_compared, full - plan.steps as u64);
    assert!(
        a.notes.iter().any(|n| n.contains("repeat 0 epoch 1")),
        "{:?}",
        a.notes
    );
}

#[test]
fn the_sync_is_named_as_the_layouts_say() {
    assert_eq!(sync_phrase(Some("tcpstore_barrier")), "the barrier");
    assert_eq!(sync_phrase(Some("gloo_all_reduce")), "the all-reduce");
    assert_eq!(sync_phrase(None), "the per-step synchronisation");
}

#[test]
fn the_wait_and_comm_shares_of_a_run_are_of_a_step_that_includes_comm() {
    let mut g = Gen(0x5EED_0019);
    for case in 0..40 {
        let plan = Plan::draw(&mut g);
        for r in ranked_runs(&mut g, &plan)
            .iter()
            .filter(|r| r.timing_mode == TimingMode::Diagnostic)
        {
            let d = r.diagnostic.as_ref().unwrap();
            let step = d.step.as_ref().unwrap().mean_s.unwrap();
            let mean = |s: &Option<StageStat>| s.as_ref().unwrap().mean_s.unwrap() / step;
            let sum = Metric::WaitShare.of_run(r).unwrap()
                + Metric::CommShare.of_run(r).unwrap()
                + mean(&d.transfer)
                + mean(&d.compute);
            assert!((sum - 1.0).abs() < 1e-9, "case {case}: {sum}");
        }
    }
}

/// A job's windows start after warm-up steps: their diagnostics set no
/// first step apart, and each rank's steps are every step of its windows;
/// the same series as epochs leave each epoch's first step out.
#[test]
fn a_jobs_window_counts_every_step_an_epoch_leaves_its_first_out() {
    let mut g = Gen(0x5EED_0119);
    for case in 0..60 {
        let plan = Plan::draw(&mut g);
        let runs = ranked_runs(&mut g, &plan);
        let steady = |runs: &[Run]| -> u64 {
            let per_rank = runs
                .iter()
                .filter(|r| r.timing_mode == TimingMode::Diagnostic && r.phase == Phase::Steady)
                .filter(|r| r.rank == Some(0))
                .count();
            per_rank as u64
        };
        let epochs = steady(&runs);
        let as_window: Vec<Run> = runs
            .iter()
            .cloned()
            .map(|mut r| {
                if let (Some(s), Some(d)) = (r.steps.as_ref(), r.diagnostic.as_ref()) {
                    let (seconds, samples) = (d.seconds.unwrap(), d.samples.unwrap());
                    r.diagnostic = Some(diagnostic_from_window(s, seconds, samples, 0, None));
                }
                r
            })
            .collect();
        let steps = |runs: Vec<Run>| rank_analysis(&config(runs)).unwrap().ranks[0].steps;
        let n = plan.steps as u64;
        assert_eq!(steps(runs), epochs * (n - 1), "case {case} {plan:?}");
        assert_eq!(steps(as_window), epochs * n, "case {case} {plan:?}");
    }
}
