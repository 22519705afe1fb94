//! `cargo xtask bench job-overhead [--pairs N] [--steps N] [--rounds N] [--debug]`: what
//! `stallscope job`'s whole-run instrumentation costs a training step, against the same script
//! uninstrumented.
//!
//! One script, `fixtures/job/train_self_timed.py` (an MLP trained on the CPU from an in-memory
//! DataLoader, a step of a few ms), times its own steps with the same clock reads whether it
//! runs plain or under `stallscope job` (`BENCH_SELF_TIME`): the ratio of the two medians is the
//! instrumentation's cost as the script itself sees it, the self-timing's own cost (one clock
//! read per step) being in both. Each pair is one plain run and one `stallscope job --repeats 1`
//! run, each a fresh process, in the order AB, BA, AB, ...; the job's whole-run process is the
//! one compared (its diagnostic process runs too, since `job` always runs both modes, and is
//! not used). The bundle's whole-run step (window ÷ steps) is printed beside the script's own
//! mean of the same steps, as a check that both measure the same thing. Last, in one process,
//! `python -m stallscope_job.overhead --micro`, for the plain loop and the background-thread
//! loop: the same training loop with the instrumentation's patches installed and removed in
//! turn (1,200 rounds by default, each a pair of 10-step chunks, on-off then off-on: the
//! interval of 400 was ±0.3 points wide on this machine, too wide to place ~1%), free of the noise
//! between processes; per loop, the median pair's share with its 95% interval, beside the same
//! script with nothing installed (A/A). It decides the goal (under 1% of each loop's step: met
//! when every loop's interval lies under it, not met when one lies over); the pairs of
//! processes overrule it only when they agree to within twice the goal.
//! The report is kept in `fixtures/bench/job-overhead.txt`; a missed goal does not fail the
//! bench, a failed run or a missing number does.
use crate::cmd::{Cmd, cargo};
use crate::demo::release_runner;
use crate::paths::target_dir;
use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use stallscope_bundle::analysis::{RatioInterval, median, ratio_interval};
use stallscope_bundle::{TimingMode, read_bundle};
use std::fmt::Write as _;
use std::path::Path;

const SCRIPT: &str = "fixtures/job/train_self_timed.py";
const KEPT: &str = "fixtures/bench/job-overhead.txt";
/// Warm-up batches before the timed steps, in both runs.
const WARMUP: u32 = 50;
/// The goal: the instrumented median step at most this much above the plain one.
const GOAL: f64 = 0.01;

#[derive(Debug, PartialEq)]
struct Args {
    pairs: usize,
    steps: u32,
    rounds: u32,
    debug: bool,
}

fn parse(args: &[String]) -> Result<Args> {
    let mut out = Args {
        pairs: 10,
        steps: 500,
        rounds: MICRO_ROUNDS,
        debug: false,
    };
    let mut it = args.iter();
    let positive = |flag: &str, v: Option<&String>| -> Result<u64> {
        let v = v.with_context(|| format!("{flag} needs a number"))?;
        v.parse()
            .ok()
            .filter(|&n| n > 0)
            .with_context(|| format!("{flag} {v:?}: expected a positive integer"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--pairs" => out.pairs = positive("--pairs", it.next())? as usize,
            "--steps" => {
                out.steps =
                    u32::try_from(positive("--steps", it.next())?).context("--steps: too large")?
            }
            "--rounds" => {
                out.rounds = u32::try_from(positive("--rounds", it.next())?)
                    .context("--rounds: too large")?
            }
            "--debug" => out.debug = true,
            other => bail!(
                "bench job-overhead: unknown argument {other:?} \
                 (--pairs N, --steps N, --rounds N, --debug)"
            ),
        }
    }
    Ok(out)
}

/// The script's own timing of one process's steps (its `BENCH_SELF_TIME` line).
#[derive(Debug, Clone, PartialEq)]
struct SelfTime {
    steps: u64,
    median_ns: f64,
    mean_ns: f64,
}

/// The line of `text` (JSON lines) written by the process of `mode` (null: run plain).
fn self_time(text: &str, mode: Option<&str>) -> Result<SelfTime> {
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).with_context(|| format!("line {line:?}"))?;
        if v["job"].as_str() != mode {
            continue;
        }
        let num = |k: &str| {
            v[k].as_f64()
                .with_context(|| format!("line {line:?}: no number {k}"))
        };
        return Ok(SelfTime {
            steps: v["steps"]
                .as_u64()
                .with_context(|| format!("line {line:?}: no steps"))?,
            median_ns: num("median_ns")?,
            mean_ns: num("mean_ns")?,
        });
    }
    bail!("no line with \"job\": {mode:?}")
}

/// One pair: the plain run and the instrumented (whole-run) one.
#[derive(Debug, Clone, PartialEq)]
struct Pair {
    plain_first: bool,
    plain: SelfTime,
    job: SelfTime,
    /// The bundle's whole-run step of the instrumented run: window seconds ÷ steps.
    bundle_step_s: f64,
}

impl Pair {
    fn ratio(&self) -> f64 {
        self.job.median_ns / self.plain.median_ns
    }
}

/// What stays the same in every run.
struct Setup<'a> {
    repo: &'a Path,
    exe: &'a Path,
    python: &'a Path,
    dir: &'a Path,
    steps: u32,
}

impl Setup<'_> {
    fn script_args(&self) -> Vec<String> {
        let script = self.repo.join(SCRIPT);
        vec![
            script.to_string_lossy().into_owned(),
            "--warmup".into(),
            WARMUP.to_string(),
            "--steps".into(),
            self.steps.to_string(),
        ]
    }

    fn plain(&self, pair: usize) -> Result<SelfTime> {
        let file = self.dir.join(format!("pair-{pair}-plain.jsonl"));
        Cmd::new(self.python)
            .env("OMP_NUM_THREADS", "1")
            .env("BENCH_SELF_TIME", &file)
            .args(self.script_args())
            .read()
            .with_context(|| format!("pair {pair}: the plain run"))?;
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("pair {pair}: reading {}", file.display()))?;
        self_time(&text, None).with_context(|| format!("pair {pair}: {}", file.display()))
    }

    /// `stallscope job --repeats 1`: its whole-run process's self-timing and bundle step.
    fn job(&self, pair: usize) -> Result<(SelfTime, f64)> {
        let file = self.dir.join(format!("pair-{pair}-job.jsonl"));
        let out = self.dir.join(format!("pair-{pair}-job"));
        Cmd::new(self.exe)
            .env("STALLSCOPE_HARNESS_DIR", self.repo.join("python"))
            .env("OMP_NUM_THREADS", "1")
            .env("BENCH_SELF_TIME", &file)
            .args(["job", "--repeats", "1", "--warmup"])
            .arg(WARMUP.to_string())
            .arg("--steps")
            .arg(self.steps.to_string())
            .arg("--out")
            .arg(&out)
            .arg("--")
            .arg(self.python)
            .args(self.script_args())
            .read()
            .with_context(|| format!("pair {pair}: the instrumented run"))?;
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("pair {pair}: reading {}", file.display()))?;
        let own = self_time(&text, Some("whole_run"))
            .with_context(|| format!("pair {pair}: {}", file.display()))?;
        let path = out.join("bundle.json");
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let bundle = read_bundle(&bytes).with_context(|| format!("reading {}", path.display()))?;
        let run = bundle
            .experiments
            .iter()
            .find(|e| e.id == "job")
            .and_then(|e| e.configurations.first())
            .and_then(|c| {
                c.runs
                    .iter()
                    .find(|r| r.timing_mode == TimingMode::WholeRun)
            })
            .and_then(|r| r.whole_run.as_ref())
            .with_context(|| format!("{}: no whole-run run of the job", path.display()))?;
        let step = match (run.seconds, run.steps) {
            (Some(s), Some(n)) if n > 0 => s / n as f64,
            _ => run
                .step_s
                .with_context(|| format!("{}: no whole-run step", path.display()))?,
        };
        ensure!(
            run.steps == Some(u64::from(self.steps)) && own.steps == u64::from(self.steps),
            "pair {pair}: the bundle counts {:?} steps and the script {}, {} were asked",
            run.steps,
            own.steps,
            self.steps
        );
        Ok((own, step))
    }
}

/// The load averages from /proc/loadavg (1, 5, 15 minutes), as written.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// What `python -m stallscope_job.overhead --micro` measured in one process.
struct Micro {
    /// The plain loop (`for x, y in loader`).
    plain: LoopCost,
    /// The background-thread loop (a thread fills a `queue.Queue` from the
    /// DataLoader; the training thread calls `get()`).
    thread: LoopCost,
}

/// One loop's instrumentation cost in one process, patches on against off.
#[derive(Debug, Clone)]
struct LoopCost {
    /// Its step with the patches removed, µs (wall), over all rounds.
    off_step_us: f64,
    /// Per pair of chunks (one on, one off): on ÷ off − 1, wall time.
    shares: Vec<f64>,
    /// On less off per step over all rounds, µs: wall time and the process's CPU time (all
    /// threads).
    wall_us: f64,
    cpu_us: f64,
    /// The same pairs' shares with nothing installed (no STALLSCOPE_JOB): the A/A check.
    floor_shares: Vec<f64>,
}

/// The median of `shares` with its interval (noise.rs's rule: order statistics, 95%).
fn interval(shares: &[f64]) -> RatioInterval {
    let ratios: Vec<f64> = shares.iter().map(|s| 1.0 + s).collect();
    ratio_interval(&ratios).expect("checked non-empty")
}

impl LoopCost {
    /// The cost as a share of the step: the median pair's, with its interval.
    fn share(&self) -> RatioInterval {
        interval(&self.shares)
    }
}

/// One loop's figures of `python -m stallscope_job.overhead --micro`'s JSON.
fn loop_cost(v: &Value, key: &str) -> Result<LoopCost> {
    let num = |variant: &str, k: &str| {
        v[key][variant][k]
            .as_f64()
            .with_context(|| format!("no {key}.{variant}.{k}"))
    };
    let list = |variant: &str| -> Result<Vec<f64>> {
        let got: Vec<f64> = v[key][variant]["pair_share"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        ensure!(!got.is_empty(), "no {key}.{variant}.pair_share");
        Ok(got)
    };
    Ok(LoopCost {
        off_step_us: num("whole_run", "off_step_us")?,
        shares: list("whole_run")?,
        wall_us: num("whole_run", "difference_us")?,
        cpu_us: num("whole_run", "cpu_difference_us")?,
        floor_shares: list("off")?,
    })
}

/// Rounds of `--micro` by default (each a pair of chunks, one on and one off; `--rounds`) and
/// steps per chunk.
const MICRO_ROUNDS: u32 = 1200;
const MICRO_CHUNK: u32 = 10;

/// `python -m stallscope_job.overhead --micro`.
fn micro(repo: &Path, python: &Path, rounds: u32) -> Result<Micro> {
    let text = Cmd::new(python)
        .env("PYTHONPATH", repo.join("python"))
        .args([
            "-m",
            "stallscope_job.overhead",
            "--micro",
            "--rounds",
            &rounds.to_string(),
            "--chunk",
            &MICRO_CHUNK.to_string(),
        ])
        .read()?;
    let v: Value = serde_json::from_str(&text).context("its JSON")?;
    Ok(Micro {
        plain: loop_cost(&v, "micro").with_context(|| text.clone())?,
        thread: loop_cost(&v, "micro_thread").with_context(|| text.clone())?,
    })
}

pub(crate) fn run(repo: &Path, args: &[String]) -> Result<()> {
    let args = parse(args)?;
    let exe = if args.debug {
        cargo().args(["build", "-p", "stallscope"]).run()?;
        target_dir(repo).join("debug").join("stallscope")
    } else {
        release_runner(repo, None)?
    };
    // `STALLSCOPE_PYTHON`, else the peers environment, as the other benches.
    let python = crate::bench_compute::peers_python()?;
    let dir = target_dir(repo).join("bench").join("job-overhead");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let setup = Setup {
        repo,
        exe: &exe,
        python: &python,
        dir: &dir,
        steps: args.steps,
    };
    let load_before = load();
    let mut pairs = Vec::new();
    for i in 0..args.pairs {
        let plain_first = i % 2 == 0;
        let (plain, (job, bundle_step_s)) = if plain_first {
            let p = setup.plain(i)?;
            (p, setup.job(i)?)
        } else {
            let j = setup.job(i)?;
            (setup.plain(i)?, j)
        };
        let pair = Pair {
            plain_first,
            plain,
            job,
            bundle_step_s,
        };
        eprintln!(
            "job-overhead: pair {}/{}: plain {}, instrumented {}, ratio {:.4}",
            i + 1,
            args.pairs,
            ms(pair.plain.median_ns),
            ms(pair.job.median_ns),
            pair.ratio()
        );
        pairs.push(pair);
    }
    let load_after = load();
    eprintln!("job-overhead: the proxy in one process (python -m stallscope_job.overhead --micro)");
    let micro =
        micro(repo, &python, args.rounds).context("python -m stallscope_job.overhead --micro");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let text = render(&Report {
        pairs: &pairs,
        steps: args.steps,
        runner: if args.debug { "debug" } else { "release" },
        cores,
        load_before: &load_before,
        load_after: &load_after,
        micro: micro.as_ref().map_err(|e| format!("{e:#}")),
    })?;
    print!("{text}");
    std::fs::write(repo.join(KEPT), &text).with_context(|| format!("writing {KEPT}"))?;
    println!("kept as {KEPT}; the runs' files are in {}", dir.display());
    Ok(())
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// A ratio as the overhead it means: `+0.42%`, `-1.30%`.
fn pct(ratio: f64) -> String {
    format!("{:+.2}%", (ratio - 1.0) * 100.0)
}

struct Report<'a> {
    pairs: &'a [Pair],
    steps: u32,
    runner: &'a str,
    cores: usize,
    load_before: &'a str,
    load_after: &'a str,
    /// The one-process figures, or why there are none.
    micro: Result<&'a Micro, String>,
}

/// (median, min, max) of `v`; None when empty.
fn spread(v: &[f64]) -> Option<(f64, f64, f64)> {
    let m = median(v)?;
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((m, min, max))
}

/// Where the one-process intervals stand against the goal.
#[derive(Debug, Clone, Copy, PartialEq)]
enum InOne {
    /// Every loop's interval is under the goal.
    Under,
    /// Some loop's interval is wholly over it.
    Over,
    /// Some loop's interval holds the goal (and none is wholly over it).
    Straddles,
}

impl InOne {
    fn of(loops: &[RatioInterval]) -> InOne {
        if loops.iter().any(|i| i.low - 1.0 >= GOAL) {
            InOne::Over
        } else if loops.iter().all(|i| i.high - 1.0 < GOAL) {
            InOne::Under
        } else {
            InOne::Straddles
        }
    }
}

/// Met or not, from the one-process intervals of the step's share (`in_one`) where there are
/// some, checked against the pairs of processes when they agree to within twice the goal (else
/// their noise is larger than the cost, and they neither confirm nor contradict it).
fn verdict(ratio: (f64, f64, f64), in_one: Option<InOne>) -> String {
    let width = ratio.2 - ratio.1;
    let pairs_resolve = width <= 2.0 * GOAL;
    let pairs_met = ratio.0 < 1.0 + GOAL;
    let pairs = if pairs_resolve {
        format!(
            "the pairs of processes agree: median ratio {}, {}",
            pct(ratio.0),
            if pairs_met {
                "within the goal"
            } else {
                "over it"
            }
        )
    } else {
        format!(
            "the pairs of processes span {:.1} points, wider than twice the goal:\n  this \
             machine's noise between processes is larger than the cost, so they neither\n  \
             confirm nor contradict it",
            width * 100.0
        )
    };
    let overruled = pairs_resolve && !pairs_met;
    match in_one {
        Some(InOne::Under) if !overruled => format!(
            "met\n  (each loop's 95% interval in one process is under 1% of its step;\n  {pairs})"
        ),
        Some(InOne::Over) => format!(
            "NOT met\n  (a loop's 95% interval in one process is over 1% of its step;\n  {pairs})"
        ),
        Some(_) if overruled => format!("NOT met\n  ({pairs})"),
        Some(_) => format!(
            "unresolved\n  (a loop's 95% interval in one process holds 1% of its step: more \
             rounds,\n  or a quieter machine, would tell;\n  {pairs})"
        ),
        None if pairs_resolve => {
            format!("{}\n  ({pairs})", if pairs_met { "met" } else { "NOT met" })
        }
        None => format!("unresolved\n  ({pairs})"),
    }
}

/// The printed report (under 100 columns).
fn render(r: &Report) -> Result<String> {
    let mut s = pairs_table(r)?;
    let col = |f: &dyn Fn(&Pair) -> f64| r.pairs.iter().map(f).collect::<Vec<_>>();
    let (Some(plain), Some(job), Some(ratio), Some(check)) = (
        spread(&col(&|p| p.plain.median_ns)),
        spread(&col(&|p| p.job.median_ns)),
        spread(&col(&|p| p.ratio())),
        spread(&col(&|p| p.bundle_step_s * 1e9 / p.job.mean_ns)),
    ) else {
        bail!("no pair ran");
    };
    writeln!(
        s,
        "\n  median step, plain:        {} [{}–{}] over the pairs",
        ms(plain.0),
        ms(plain.1),
        ms(plain.2)
    )?;
    writeln!(
        s,
        "  median step, instrumented: {} [{}–{}]",
        ms(job.0),
        ms(job.1),
        ms(job.2)
    )?;
    writeln!(
        s,
        "  ratio instrumented ÷ plain: {:.4} [{:.4}–{:.4}] over {} pairs ({}; {} to {})",
        ratio.0,
        ratio.1,
        ratio.2,
        r.pairs.len(),
        pct(ratio.0),
        pct(ratio.1),
        pct(ratio.2)
    )?;
    writeln!(
        s,
        "  the bundle's whole-run step ÷ the script's own mean of the same steps: {:.4} \
         [{:.4}–{:.4}]",
        check.0, check.1, check.2
    )?;
    let in_one = one_process(&mut s, &r.micro)?;
    writeln!(
        s,
        "\n  goal: the whole-run instrumentation under 1% of the step, both loops: {}",
        verdict(ratio, in_one)
    )?;
    writeln!(
        s,
        "  machine: {} cores; load average (1, 5, 15 min) before {}, after {}",
        r.cores, r.load_before, r.load_after
    )?;
    Ok(s)
}

/// The report's opening: what was run, and one row per pair.
fn pairs_table(r: &Report) -> Result<String> {
    let mut s = String::new();
    writeln!(
        s,
        "job-overhead: {SCRIPT} (MLP 128-512-512-10, batch 64,\n  \
         CPU, OMP_NUM_THREADS=1, num_workers=0), {} steps after {WARMUP} warm-up, plain vs under\n  \
         `stallscope job` (its whole-run process; {} runner), {} pairs in the order AB, BA, AB, \
         ...\n  (A = plain), each run a fresh process. Step: the script's own clock, from one \
         next() to\n  the next, in both runs; the figure is the median over the steps; ratio = \
         instrumented ÷\n  plain within the pair.",
        r.steps,
        r.runner,
        r.pairs.len()
    )?;
    writeln!(
        s,
        "\n  {:>4} {:>5} {:>12} {:>13} {:>8} {:>9}   {:>11} {:>11}",
        "pair", "order", "plain", "instrumented", "ratio", "overhead", "bundle step", "script mean"
    )?;
    writeln!(s, "  {}", "-".repeat(84))?;
    for (i, p) in r.pairs.iter().enumerate() {
        writeln!(
            s,
            "  {:>4} {:>5} {:>12} {:>13} {:>8} {:>9}   {:>11} {:>11}",
            i + 1,
            if p.plain_first { "AB" } else { "BA" },
            ms(p.plain.median_ns),
            ms(p.job.median_ns),
            format!("{:.4}", p.ratio()),
            pct(p.ratio()),
            ms(p.bundle_step_s * 1e9),
            ms(p.job.mean_ns),
        )?;
    }
    Ok(s)
}

/// A share of the step with its interval: `+0.62% [+0.41% to +0.85%]`.
fn shown(i: &RatioInterval) -> String {
    format!("{} [{} to {}]", pct(i.median), pct(i.low), pct(i.high))
}

/// The one-process figures (or why there are none): each loop's cost as a share of its own
/// step, with its interval; where those stand against the goal, when there are figures.
fn one_process(s: &mut String, micro: &Result<&Micro, String>) -> Result<Option<InOne>> {
    let m = match micro {
        Ok(m) => m,
        Err(e) => {
            writeln!(
                s,
                "  in one process (stallscope_job.overhead --micro): failed: {e}"
            )?;
            return Ok(None);
        }
    };
    writeln!(
        s,
        "\n  in one process, interleaved (stallscope_job.overhead --micro: the same training \
         loop with the\n  instrumentation's patches installed and removed in turn inside the \
         open window; {} rounds,\n  each a pair of {}-step chunks, on-off, off-on, ...; per pair \
         on ÷ off − 1 in wall time;\n  the median pair, [its 95% interval]):",
        m.plain.shares.len(),
        MICRO_CHUNK
    )?;
    for (name, c) in [("plain loop ", &m.plain), ("thread loop", &m.thread)] {
        writeln!(
            s,
            "  {name}: {} of its {} step; over all rounds {:+.2} µs per step,\n  \
             {:13}CPU time {:+.2} µs; A/A (nothing installed) {}",
            shown(&c.share()),
            ms(c.off_step_us * 1e3),
            c.wall_us,
            "",
            c.cpu_us,
            shown(&interval(&c.floor_shares)),
        )?;
    }
    Ok(Some(InOne::of(&[m.plain.share(), m.thread.share()])))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_and_their_defaults() {
        let a = parse(&[]).unwrap();
        assert_eq!(
            (a.pairs, a.steps, a.rounds, a.debug),
            (10, 500, 1200, false)
        );
        let a = parse(&strings(&[
            "--pairs", "4", "--debug", "--steps", "20", "--rounds", "40",
        ]));
        let a = a.unwrap();
        assert_eq!((a.pairs, a.steps, a.rounds, a.debug), (4, 20, 40, true));
        assert!(parse(&strings(&["--rounds", "0"])).is_err());
        assert!(parse(&strings(&["--pairs", "0"])).is_err());
        assert!(parse(&strings(&["--steps"])).is_err());
        assert!(parse(&strings(&["--what"])).is_err());
    }

    #[test]
    fn the_line_of_each_mode_is_found() {
        let text = "{\"job\": \"whole_run\", \"steps\": 3, \"median_ns\": 5.0, \"mean_ns\": 6.0}\n\
                    {\"job\": \"diagnostic\", \"steps\": 3, \"median_ns\": 9.0, \"mean_ns\": 9.0}\n";
        let w = self_time(text, Some("whole_run")).unwrap();
        assert_eq!((w.steps, w.median_ns, w.mean_ns), (3, 5.0, 6.0));
        assert!(self_time(text, None).is_err());
        let plain = "{\"job\": null, \"steps\": 2, \"median_ns\": 4, \"mean_ns\": 4.5}";
        assert_eq!(self_time(plain, None).unwrap().median_ns, 4.0);
    }

    #[test]
    fn the_report_says_met_or_not_and_fits_100_columns() {
        let t = |median_ns| SelfTime {
            steps: 500,
            median_ns,
            mean_ns: median_ns,
        };
        let pair = |plain, job| Pair {
            plain_first: true,
            plain: t(plain),
            job: t(job),
            bundle_step_s: job / 1e9,
        };
        let pairs = [pair(3e6, 3.01e6), pair(3e6, 3.0e6), pair(3.1e6, 3.11e6)];
        let report = |pairs: &[Pair], micro: Result<Micro, String>| {
            render(&Report {
                pairs,
                steps: 500,
                runner: "release",
                cores: 2,
                load_before: "1.0 1.0 1.0",
                load_after: "2.0 2.0 2.0",
                micro: micro.as_ref().map_err(String::clone),
            })
            .unwrap()
        };
        // 40 pairs around `mid` µs of a 3 ms step, spread ±`spread` µs.
        let cost = |mid: f64, spread: f64| {
            let shares: Vec<f64> = (0..40)
                .map(|i| (mid + spread * ((i % 5) as f64 - 2.0) / 2.0) / 3000.0)
                .collect();
            LoopCost {
                off_step_us: 3000.0,
                shares,
                wall_us: mid,
                cpu_us: mid,
                floor_shares: vec![-0.001, 0.0, 0.001],
            }
        };
        let micro = |plain: LoopCost, thread: LoopCost| Ok(Micro { plain, thread });
        let cheap = || micro(cost(6.0, 4.0), cost(4.0, 2.0));
        let dear = || micro(cost(60.0, 10.0), cost(4.0, 2.0));
        // The thread loop alone over the goal fails it too.
        let dear_thread = || micro(cost(4.0, 2.0), cost(45.0, 5.0));
        // An interval that holds the goal: 30 µs of 3 ms, ±15.
        let straddling = || micro(cost(27.0, 15.0), cost(4.0, 2.0));
        let narrow = |text: &str| text.lines().all(|l| l.chars().count() <= 100);
        // Pairs that agree and a cheap proxy: met, both said.
        let text = report(&pairs, cheap());
        assert!(text.contains("step, both loops: met"), "{text}");
        assert!(
            text.contains("ratio instrumented ÷ plain: 1.0032"),
            "{text}"
        );
        assert!(
            text.contains("plain loop : +0.20% [+0.13% to +0.27%] of its 3.000 ms step"),
            "{text}"
        );
        assert!(
            text.contains("A/A (nothing installed) +0.00% [-0.10% to +0.10%]"),
            "{text}"
        );
        assert!(text.contains("the pairs of processes agree"), "{text}");
        assert!(narrow(&text), "{text}");
        // Noisy pairs: the one-process figure decides, the pairs said to be noise.
        let noisy = [pair(3e6, 3.2e6), pair(3e6, 3.0e6), pair(3e6, 3.1e6)];
        let text = report(&noisy, cheap());
        assert!(text.contains("step, both loops: met"), "{text}");
        assert!(text.contains("confirm nor contradict"), "{text}");
        assert!(narrow(&text), "{text}");
        assert!(report(&noisy, dear()).contains("step, both loops: NOT met"));
        let text = report(&noisy, dear_thread());
        assert!(text.contains("step, both loops: NOT met"), "{text}");
        assert!(
            text.contains("thread loop: +1.50% [+1.42% to +1.58%]"),
            "{text}"
        );
        assert!(narrow(&text), "{text}");
        // An interval that holds the goal is neither.
        let text = report(&noisy, straddling());
        assert!(text.contains("step, both loops: unresolved"), "{text}");
        assert!(narrow(&text), "{text}");
        // Without the one-process figure, noisy pairs leave it unresolved.
        let text = report(&noisy, Err("python died".into()));
        assert!(
            text.contains("step, both loops: unresolved") && text.contains("python died"),
            "{text}"
        );
        assert!(narrow(&text), "{text}");
        // Pairs that agree on a cost over the goal overrule a cheap proxy.
        let over = [pair(3e6, 3.06e6), pair(3e6, 3.05e6), pair(3e6, 3.07e6)];
        assert!(report(&over, cheap()).contains("step, both loops: NOT met"));
        assert!(report(&over, Err("no".into())).contains("step, both loops: NOT met"));
    }
}
