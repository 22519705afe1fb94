//! Property tests of a merged bundle's pooled figures and of scaling
//! efficiency over generated bundles: the pooled rate is every rank's
//! samples over the slowest rank's wall time and its step the largest;
//! ranks identical to a one-process run scale with efficiency 1 and no
//! loss; the loss split sums to the loss; the order of runs and of the two
//! sides does not matter; a rank slowed in its loader puts the loss in
//! data, one slowed in compute in the rest.

mod generated;

use generated::*;
use stallscope_bundle::analysis::*;
use stallscope_bundle::merge::job_view;
use stallscope_bundle::*;

fn config(runs: Vec<Run>) -> Configuration {
    Configuration::new("w2", "2 workers")
        .with_param("workers", 2)
        .with_runs(runs)
}

/// A one-process bundle: one rank's runs without rank and comm.
fn single(g: &mut Gen, plan: &Plan) -> Bundle {
    let one = Plan {
        ranks: 1,
        slowed: None,
        ..plan.clone()
    };
    let runs = ranked_runs(g, &one).into_iter().map(unranked).collect();
    let mut b = merged_bundle(1, config(runs));
    b.ranks.clear();
    b
}

fn unranked(mut r: Run) -> Run {
    r.rank = None;
    if let (Some(s), Some(d)) = (r.steps.as_mut(), r.diagnostic.as_ref()) {
        s.comm_ns.clear();
        let (seconds, samples) = (d.seconds.unwrap(), d.samples.unwrap());
        r.diagnostic = Some(diagnostic_from_series(s, seconds, samples, 0, None));
    }
    r
}

/// `world` copies of a one-process bundle's runs, one per rank.
fn copies(single: &Bundle, world: u32) -> Bundle {
    let c = &single.experiments[0].configurations[0];
    let runs = (0..world)
        .flat_map(|k| {
            c.runs.iter().map(move |r| Run {
                rank: Some(k),
                id: format!("rank{k}-{}", r.id),
                ..r.clone()
            })
        })
        .collect();
    merged_bundle(world, config(runs))
}

fn rate(b: &Bundle, phase: Phase) -> f64 {
    let key = MetricKey::new(Metric::SamplesPerS, TimingMode::WholeRun, phase);
    let v = job_view(b);
    metric_value(&v.experiments[0].configurations[0], &key).unwrap()
}

#[test]
fn the_pooled_run_pools_samples_over_the_slowest_wall_time() {
    let mut g = Gen(0x5EED_0020);
    for case in 0..80 {
        let plan = Plan::draw(&mut g);
        let mut runs = ranked_runs(&mut g, &plan);
        let c = config(runs.clone());
        let (pooled, notes) = pooled_runs(&c, Some(plan.ranks));
        assert!(notes.is_empty(), "case {case}: {notes:?}");
        assert_eq!(
            pooled.len() as u32,
            2 * plan.repeats * plan.epochs,
            "case {case}"
        );
        for j in pooled
            .iter()
            .filter(|j| j.timing_mode == TimingMode::WholeRun)
        {
            let of = |r: &&Run| r.repeat == j.repeat && r.epoch == j.epoch && r.whole_run.is_some();
            let ranks: Vec<&Run> = c.runs.iter().filter(of).collect();
            let w = |r: &Run| r.whole_run.clone().unwrap();
            let samples: u64 = ranks.iter().map(|r| w(r).samples.unwrap()).sum();
            let wall = ranks
                .iter()
                .map(|r| w(r).seconds.unwrap())
                .fold(0.0, f64::max);
            let jw = w(j);
            assert_eq!(jw.samples, Some(samples), "case {case}");
            assert_eq!(jw.seconds, Some(wall), "case {case}");
            let sum_of_rates: f64 = ranks.iter().map(|r| w(r).samples_per_s.unwrap()).sum();
            assert!(
                jw.samples_per_s.unwrap() <= sum_of_rates * (1.0 + 1e-12),
                "case {case}"
            );
            let steps = ranks.iter().map(|r| Metric::StepTimeS.of_run(r).unwrap());
            assert_eq!(jw.step_s, Some(steps.fold(0.0, f64::max)), "case {case}");
            assert_eq!(j.job.as_ref().unwrap().ranks, plan.ranks);
            // The pooled CPU is every rank's, over the longest epoch.
            let cpu: f64 = ranks.iter().map(|r| r.cost.as_ref().unwrap().cpu_s).sum();
            let jc = j.cost.as_ref().unwrap();
            assert!((jc.cpu_s - cpu).abs() <= 1e-9 * cpu, "case {case}");
            let per = jc.cpu_s_per_1000_samples.unwrap();
            assert!(
                (per - cpu / samples as f64 * 1e3).abs() <= 1e-9 * per,
                "case {case}"
            );
        }
        // The runs' order does not change the pooled runs.
        g.shuffle(&mut runs);
        let (again, _) = pooled_runs(&config(runs), Some(plan.ranks));
        assert_eq!(again, pooled, "case {case}");
    }
}

#[test]
fn an_epoch_a_rank_did_not_measure_makes_no_pooled_run() {
    let mut g = Gen(0x5EED_0021);
    for case in 0..40 {
        let plan = Plan::draw(&mut g);
        let mut runs = ranked_runs(&mut g, &plan);
        let gone = g.below(runs.len() as u64) as usize;
        let lost = runs.remove(gone);
        let (pooled, notes) = pooled_runs(&config(runs), Some(plan.ranks));
        let hit = |j: &Run| {
            j.repeat == lost.repeat && j.epoch == lost.epoch && j.timing_mode == lost.timing_mode
        };
        assert!(!pooled.iter().any(hit), "case {case}");
        assert_eq!(pooled.len() as u32, 2 * plan.repeats * plan.epochs - 1);
        assert!(notes[0].contains(&format!("{} of {} ranks", plan.ranks - 1, plan.ranks)));
    }
}

#[test]
fn identical_ranks_scale_perfectly() {
    let mut g = Gen(0x5EED_0022);
    for case in 0..60 {
        let plan = Plan::draw(&mut g);
        let one = single(&mut g, &plan);
        let job = copies(&one, plan.ranks);
        let s = compare_scaling(&one, &job).unwrap_or_else(|| panic!("case {case}"));
        assert_eq!((s.base_world, s.new_world), (1, plan.ranks));
        let row = &s.experiments[0].rows[0];
        let e = row.efficiency.unwrap();
        assert!((e - 1.0).abs() < 1e-9, "case {case}: {e}");
        let split = row.split.unwrap();
        for part in [split.data, split.comm, split.rest] {
            assert!(part.abs() < 1e-9, "case {case}: {split:?}");
        }
        let ratio = rate(&job, Phase::Steady) / rate(&one, Phase::Steady);
        assert!((ratio - f64::from(plan.ranks)).abs() < 1e-9, "case {case}");
        // `compare` reads the job, not one rank's figure pooled over ranks
        // (issue 20: it printed 1.26× for a job 2.5× as fast).
        let cmp = compare_bundles(&one, &job, 5.0);
        let row = &cmp.experiments[0].rows[0];
        assert!(
            (row.ratio.unwrap() - f64::from(plan.ranks)).abs() < 1e-9,
            "case {case}"
        );
        // A world size is the job's, not the machine's (issue 32).
        assert!(
            cmp.job_differences
                .iter()
                .any(|d| d.field == "world size (ranks)")
        );
        assert!(
            !cmp.environment_differences
                .iter()
                .any(|d| d.field.contains("ranks"))
        );
    }
}

#[test]
fn the_split_sums_to_the_loss_and_the_sides_are_reciprocal() {
    let mut g = Gen(0x5EED_0023);
    for case in 0..80 {
        let (pa, pb) = (Plan::draw(&mut g), Plan::draw(&mut g));
        let a = merged_bundle(pa.ranks, config(ranked_runs(&mut g, &pa)));
        let mut b = merged_bundle(pb.ranks, config(ranked_runs(&mut g, &pb)));
        if pa.ranks == pb.ranks {
            assert!(compare_scaling(&a, &b).is_none(), "case {case}");
            continue;
        }
        let ab = compare_scaling(&a, &b).unwrap();
        let ba = compare_scaling(&b, &a).unwrap();
        let (x, y) = (&ab.experiments[0].rows[0], &ba.experiments[0].rows[0]);
        let (ex, ey) = (x.efficiency.unwrap(), y.efficiency.unwrap());
        assert!((ex * ey - 1.0).abs() < 1e-9, "case {case}: {ex} × {ey}");
        for row in [x, y] {
            let s = row.split.unwrap();
            let sum = s.data + s.comm + s.rest;
            assert!((sum - row.loss.unwrap()).abs() < 1e-9, "case {case}: {s:?}");
        }
        // Shuffling the runs of a side changes nothing.
        g.shuffle(&mut b.experiments[0].configurations[0].runs);
        assert_eq!(compare_scaling(&a, &b).unwrap(), ab, "case {case}");
    }
}

#[test]
fn a_slowed_rank_puts_the_loss_where_it_was_slowed() {
    let mut g = Gen(0x5EED_0024);
    for case in 0..80 {
        let plan = Plan::draw(&mut g);
        let (_, _, stage) = plan.slowed.unwrap();
        let one = single(&mut g, &plan);
        let job = merged_bundle(plan.ranks, config(ranked_runs(&mut g, &plan)));
        let s = compare_scaling(&one, &job).unwrap();
        let row = &s.experiments[0].rows[0];
        let (e, split) = (row.efficiency.unwrap(), row.split.unwrap());
        let ctx = format!("case {case} {plan:?}: {e} {split:?}");
        assert!(e < 1.0, "{ctx}");
        match stage {
            Slow::Data => assert!(split.data > split.rest.max(split.comm), "{ctx}"),
            Slow::Compute => assert!(split.rest > split.data.max(split.comm), "{ctx}"),
        }
        // Every rank at least as slow as the single run: the job cannot
        // do better than the ideal.
        assert!(row.loss.unwrap() > 0.0, "{ctx}");
    }
}

#[test]
fn the_efficiency_formula_holds_for_any_rates() {
    let mut g = Gen(0x5EED_0025);
    for case in 0..500 {
        let (rb, rn) = (1.0 + 1e4 * g.unit(), 1.0 + 1e5 * g.unit());
        let (wb, wn) = (g.range(1, 64) as u32, g.range(1, 16_385) as u32);
        let shares = ((g.unit(), g.unit() * 0.5), (g.unit(), g.unit() * 0.5));
        let (e, split) = scaling_efficiency((rb, wb), (rn, wn), Some(shares)).unwrap();
        let want = rn * f64::from(wb) / (rb * f64::from(wn));
        assert!((e - want).abs() <= 1e-12 * want, "case {case}");
        let s = split.unwrap();
        assert!(
            (s.data + s.comm + s.rest - (1.0 - e)).abs() < 1e-9,
            "case {case}"
        );
    }
    assert!(scaling_efficiency((0.0, 1), (1.0, 2), None).is_none());
}
