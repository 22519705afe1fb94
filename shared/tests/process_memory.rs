//! Per-process memory of a job's window (format 1.4, `memory.processes`)
//! over generated runs: every bundle whose processes hold USS ≤ PSS ≤ RSS
//! validates and round-trips; breaking the order of one process is a
//! problem at that process's field; the tables' per-worker figures are the
//! largest worker's, and a job of ranks takes its worst rank's processes.

mod generated;

use generated::*;
use stallscope_bundle::analysis::{Metric, MetricKey, metric_value, pooled_runs};
use stallscope_bundle::*;

fn processes(g: &mut Gen) -> Vec<ProcessMemory> {
    let workers = g.below(5) as u32;
    let mut out = Vec::new();
    for i in 0..=workers {
        let uss = g.range(1, 1 << 30);
        let pss = uss + g.below(1 << 28);
        let rss = pss + g.below(1 << 28);
        out.push(ProcessMemory {
            role: if i == 0 { "main" } else { "worker" }.into(),
            worker_id: (i > 0).then(|| i - 1),
            rss_bytes: Some(rss),
            pss_bytes: (g.below(8) > 0).then_some(pss),
            uss_bytes: (g.below(8) > 0).then_some(uss),
            peak_rss_bytes: (g.below(4) > 0).then(|| rss + g.below(1 << 20)),
            uss_at_open_bytes: (g.below(4) > 0).then(|| g.below(uss + 1)),
            ..ProcessMemory::default()
        });
    }
    out
}

fn run_with(g: &mut Gen, id: &str, rank: Option<u32>) -> Run {
    let mut r = Run::new(id, TimingMode::WholeRun, 0, 1, Phase::Steady);
    r.whole_run = Some(WholeRun::measured(1.0, 100, 10, 0));
    r.rank = rank;
    r.memory = Some(Memory {
        processes: processes(g),
        ..Memory::default()
    });
    r
}

fn bundle_of(runs: Vec<Run>) -> Bundle {
    let c = Configuration::new("script", "your settings").with_runs(runs);
    let mut e = Experiment::new("job", ExperimentKind::Loader, "Your training job");
    e.configurations = vec![c];
    let mut b = merged_bundle(1, Configuration::new("x", "x"));
    b.ranks.clear();
    b.environment.rank = None;
    b.experiments = vec![e];
    b
}

fn largest_worker(r: &Run, f: fn(&ProcessMemory) -> Option<u64>) -> Option<f64> {
    let ps = &r.memory.as_ref()?.processes;
    ps.iter()
        .filter(|p| p.role == "worker")
        .filter_map(f)
        .max()
        .map(|b| b as f64)
}

#[test]
fn ordered_processes_validate_round_trip_and_give_the_largest_worker() {
    let mut g = Gen(0x5EED_0019);
    for case in 0..200 {
        let run = run_with(&mut g, "r0", None);
        let (uss, pss) = (
            largest_worker(&run, |p| p.uss_bytes),
            largest_worker(&run, |p| p.pss_bytes),
        );
        let b = bundle_of(vec![run]);
        assert_eq!(validate(&b), vec![], "case {case}");
        let again = read_bundle(b.to_json_pretty().as_bytes()).unwrap();
        assert_eq!(again, b, "case {case}");
        let c = &b.experiments[0].configurations[0];
        let key = |m| MetricKey::new(m, TimingMode::WholeRun, Phase::Steady);
        assert_eq!(metric_value(c, &key(Metric::WorkerUssBytes)), uss, "{case}");
        assert_eq!(metric_value(c, &key(Metric::WorkerPssBytes)), pss, "{case}");
    }
}

#[test]
fn a_process_out_of_order_is_located() {
    let mut g = Gen(0x5EED_0119);
    for case in 0..200 {
        let mut run = run_with(&mut g, "r0", None);
        let ps = &mut run.memory.as_mut().unwrap().processes;
        let i = g.below(ps.len() as u64) as usize;
        let p = &mut ps[i];
        let rss = p.rss_bytes.unwrap();
        let field = if g.below(2) == 0 {
            p.pss_bytes = Some(rss + 1 + g.below(1000));
            p.uss_bytes = None;
            "pss_bytes"
        } else {
            // USS above a PSS that is itself within the RSS.
            p.pss_bytes = Some(rss);
            p.uss_bytes = Some(rss + 1 + g.below(1000));
            "uss_bytes"
        };
        let paths: Vec<String> = validate(&bundle_of(vec![run]))
            .into_iter()
            .map(|p| p.path)
            .collect();
        let want =
            format!("$.experiments[0].configurations[0].runs[0].memory.processes[{i}].{field}");
        assert_eq!(paths, vec![want], "case {case}");
    }
}

#[test]
fn a_job_of_ranks_keeps_its_worst_ranks_processes() {
    let mut g = Gen(0x5EED_0219);
    for case in 0..100 {
        let world = g.range(2, 6) as u32;
        let runs: Vec<Run> = (0..world)
            .map(|r| run_with(&mut g, &format!("r{r}"), Some(r)))
            .collect();
        let worst = runs
            .iter()
            .max_by_key(|r| largest_worker(r, |p| p.uss_bytes).map(|b| b as u64))
            .map(|r| r.memory.as_ref().unwrap().processes.clone())
            .unwrap();
        let c = Configuration::new("c", "c").with_runs(runs);
        let (pooled, _) = pooled_runs(&c, Some(world));
        assert_eq!(pooled.len(), 1, "case {case}");
        let got = &pooled[0].memory.as_ref().unwrap().processes;
        let uss = |ps: &[ProcessMemory]| {
            ps.iter()
                .filter(|p| p.role == "worker")
                .filter_map(|p| p.uss_bytes)
                .max()
        };
        assert_eq!(uss(got), uss(&worst), "case {case}");
    }
}
