//! `cargo xtask bench compute-peers`: the seeds/003 CNN's train step in tch (the runner's
//! `compute` experiment) against the same step in Python PyTorch (python/tools/compute_step.py),
//! batches 32 and 256, the same torch thread count, the two sides interleaved round by round.
use crate::bench_peers::run_suite;
use crate::cmd::Cmd;
use crate::demo::release_runner;
use crate::paths::target_dir;
use crate::peers;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use stallscope_bundle::analysis::{Summary, show_ratio};
use stallscope_bundle::{Bundle, Phase, TimingMode};
use std::path::{Path, PathBuf};

const ROUNDS: u32 = 5;
const BATCHES: [u32; 2] = [32, 256];
/// Timed steps per epoch (tch) and per call (Python).
const STEPS: u32 = 20;
const SEED: u64 = 42;
/// One torch thread on both sides: the comparison is of the two front ends over the same
/// kernels, not of thread pools competing for 2 cores.
const THREADS: u32 = 1;
const KEPT: &str = "fixtures/bench/compute-peers.json";
const COMMAND: &str = "cargo xtask bench compute-peers";

/// The tch side's suite for one batch size: the `compute` experiment, one repeat of two epochs;
/// epoch 0 (after one untimed warm-up step) is the cold one, epoch 1 the steady one we read.
fn tch_suite(batch: u32) -> String {
    format!(
        "# Written by `{COMMAND}`: the tch side at batch {batch}.\n\
         title = \"compute-peers: tch, batch {batch}\"\n\
         seed = {SEED}\ndata_seed = {SEED}\ntorch_threads = {THREADS}\nrepeats = 1\nepochs = 2\n\n\
         [[experiment]]\nid = \"compute\"\nkind = \"compute\"\nmodel = \"fashion_cnn\"\n\
         batch_sizes = [{batch}]\nsteps = {STEPS}\n"
    )
}

/// Per-step ns of the steady diagnostic epoch (each step timed alone, as the Python side
/// does) and the steady whole-run mean step seconds of configuration `bs{batch}`.
fn tch_steps(bundle: &Bundle, batch: u32) -> Result<(Vec<u64>, Option<f64>)> {
    let c = bundle
        .experiment("compute")
        .and_then(|e| {
            e.configurations
                .iter()
                .find(|c| c.id == format!("bs{batch}"))
        })
        .with_context(|| format!("the tch bundle has no compute/bs{batch}"))?;
    if let Some(f) = &c.failure {
        bail!("tch compute at batch {batch} failed: {f:?}");
    }
    let steady = |mode: TimingMode| {
        c.runs
            .iter()
            .find(move |r| r.timing_mode == mode && r.phase == Phase::Steady)
    };
    let ns = steady(TimingMode::Diagnostic)
        .and_then(|r| r.steps.as_ref())
        .map(|s| s.compute_ns.clone())
        .context("the tch bundle has no steady diagnostic run with per-step times")?;
    let whole = steady(TimingMode::WholeRun)
        .and_then(|r| r.whole_run.as_ref())
        .and_then(|w| w.step_s);
    Ok((ns, whole))
}

/// The Python side: one call of compute_step.py, its JSON line.
fn python_steps(repo: &Path, python: &Path, batch: u32) -> Result<(Vec<u64>, Value)> {
    let args = json!({"batch": batch, "steps": STEPS, "seed": SEED, "threads": THREADS});
    let out = Cmd::new(python)
        .arg(repo.join("python/tools/compute_step.py"))
        .arg(args.to_string())
        .read()?;
    let line: Value = serde_json::from_str(out.trim())
        .with_context(|| format!("compute_step.py printed {out:?}"))?;
    let ns = line["step_ns"]
        .as_array()
        .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<_>>>())
        .with_context(|| format!("compute_step.py: no step_ns list in {line}"))?;
    Ok((ns, line))
}

/// `STALLSCOPE_PYTHON`, else the peers environment `cargo xtask setup --peers` makes.
pub(crate) fn peers_python() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("STALLSCOPE_PYTHON").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let p = peers::python()?;
    if !p.exists() {
        bail!(
            "no peers Python at {}; run `cargo xtask setup --peers`",
            p.display()
        );
    }
    Ok(p)
}

fn median_ns(ns: &[u64]) -> f64 {
    let v: Vec<f64> = ns.iter().map(|&n| n as f64).collect();
    Summary::of(&v).map_or(f64::NAN, |s| s.median)
}

pub(crate) fn run(repo: &Path) -> Result<()> {
    let exe = release_runner(repo, None)?;
    let python = peers_python()?;
    let dir = target_dir(repo).join("bench").join("compute-peers");
    std::fs::create_dir_all(&dir)?;
    let mut rounds = Vec::new();
    // Per batch: each round's median step ns, tch and Python.
    let mut medians: Vec<(u32, Vec<f64>, Vec<f64>)> = BATCHES
        .iter()
        .map(|&b| (b, Vec::new(), Vec::new()))
        .collect();
    let mut versions = json!({});
    for round in 0..ROUNDS {
        for (i, &batch) in BATCHES.iter().enumerate() {
            // Alternate which side goes first, so neither always runs on a warmer machine.
            let tch_first = round % 2 == 0;
            let mut tch = None;
            let mut py = None;
            for side in if tch_first { [0, 1] } else { [1, 0] } {
                if side == 0 {
                    tch = Some(tch_side(repo, &exe, &dir, (round, batch), &mut versions)?);
                } else {
                    eprintln!("$ python compute_step.py (round {round}, batch {batch})");
                    py = Some(python_steps(repo, &python, batch)?);
                }
            }
            let TchSide {
                step_ns: tch_ns,
                whole_step_s,
                out,
            } = tch.expect("ran");
            let (py_ns, line) = py.expect("ran");
            versions["python"] = line["python"].clone();
            versions["python_torch"] = line["torch"].clone();
            versions["python_torch_threads"] = line["torch_threads"].clone();
            let (t, p) = (median_ns(&tch_ns), median_ns(&py_ns));
            medians[i].1.push(t);
            medians[i].2.push(p);
            rounds.push(json!({
                "round": round,
                "batch": batch,
                "order": if tch_first { ["tch", "python"] } else { ["python", "tch"] },
                "tch": {
                    "median_step_ns": t,
                    "step_ns": tch_ns,
                    "whole_run_mean_step_s": whole_step_s,
                    "bundle": out.join("bundle.json").strip_prefix(repo).unwrap_or(&out).display().to_string(),
                },
                "python": {"median_step_ns": p, "step_ns": py_ns},
            }));
        }
    }
    let summary = summarise(&medians);
    println!("{}", render(&summary, &versions));
    let record = json!({
        "bench": "compute-peers",
        "command": COMMAND,
        "what": "the seeds/003 CNN (fashion_cnn, 105,866 parameters), Adam 1e-3, one train step \
                 (zero_grad, forward, cross-entropy, backward, step) on synthetic batches on the \
                 CPU, each step timed alone: tch = the runner's compute experiment, steady \
                 diagnostic epoch (compute_ns), after one warm-up step and a cold epoch; python = \
                 python/tools/compute_step.py after 10 warm-up steps",
        "rounds_n": ROUNDS,
        "steps_per_round": STEPS,
        "torch_threads": THREADS,
        "seed": SEED,
        "versions": versions,
        "summary": summary,
        "rounds": rounds,
    });
    let text = serde_json::to_string_pretty(&record)? + "\n";
    std::fs::write(repo.join(KEPT), text).with_context(|| format!("writing {KEPT}"))?;
    println!("record: {KEPT}");
    Ok(())
}

/// What the tch side of one (round, batch) left.
struct TchSide {
    /// Each step's compute time.
    step_ns: Vec<u64>,
    /// The whole-run epoch's mean step.
    whole_step_s: Option<f64>,
    /// The run's folder.
    out: PathBuf,
}

/// The tch side of one (round, batch): the compute suite through the
/// release runner; its step times and whole-run mean step, and its folder.
/// The bundle's libtorch version and thread count go into `versions`.
fn tch_side(
    repo: &Path,
    exe: &Path,
    dir: &Path,
    (round, batch): (u32, u32),
    versions: &mut Value,
) -> Result<TchSide> {
    let suite = dir.join(format!("tch-bs{batch}.toml"));
    std::fs::write(&suite, tch_suite(batch))?;
    let out = dir.join(format!("r{round}-bs{batch}"));
    let bundle = run_suite(repo, exe, &suite, &out)?;
    versions["libtorch"] = json!(
        bundle
            .environment
            .libtorch
            .as_ref()
            .map(|l| l.version.clone())
    );
    versions["tch_torch_threads"] = json!(
        bundle
            .environment
            .threads
            .as_ref()
            .and_then(|t| t.torch_intra_op)
    );
    let (step_ns, whole_step_s) = tch_steps(&bundle, batch)?;
    Ok(TchSide {
        step_ns,
        whole_step_s,
        out,
    })
}

/// Per batch: the median, min and max over the rounds of each side's
/// median step, and Python's time over tch's.
fn summarise(medians: &[(u32, Vec<f64>, Vec<f64>)]) -> Vec<Value> {
    medians
        .iter()
        .map(|(b, t, p)| {
            let (t, p) = (Summary::of(t), Summary::of(p));
            json!({
                "batch": b,
                "tch_median_step_ms": t.map(|s| s.median / 1e6),
                "tch_min_max_ms": t.map(|s| [s.min / 1e6, s.max / 1e6]),
                "python_median_step_ms": p.map(|s| s.median / 1e6),
                "python_min_max_ms": p.map(|s| [s.min / 1e6, s.max / 1e6]),
                "python_over_tch": t.zip(p).map(|(t, p)| p.median / t.median),
            })
        })
        .collect()
}

fn ms(v: &Value) -> String {
    v.as_f64().map_or("—".into(), |x| format!("{x:.2}"))
}

/// The summary table (under 100 columns).
fn render(summary: &[Value], versions: &Value) -> String {
    let mut s = format!(
        "compute-peers: fashion_cnn train step, ms per step (median of {ROUNDS} rounds' medians of \
         {STEPS} steps,\n[min–max] of the rounds); torch threads {THREADS} on both sides\n\n"
    );
    s += &format!(
        "  {:>5}  {:>8} {:>17}  {:>8} {:>17}  {:>13}\n",
        "batch", "tch", "[min–max]", "python", "[min–max]", "python ÷ tch"
    );
    s += &format!("  {}\n", "-".repeat(76));
    for r in summary {
        let range = |k: &str| match r[k].as_array() {
            Some(a) if a.len() == 2 => format!("[{}–{}]", ms(&a[0]), ms(&a[1])),
            _ => "—".into(),
        };
        s += &format!(
            "  {:>5}  {:>8} {:>17}  {:>8} {:>17}  {:>13}\n",
            // A `Value` ignores width and alignment: format the number itself.
            r["batch"].as_u64().map_or("?".into(), |b| b.to_string()),
            ms(&r["tch_median_step_ms"]),
            range("tch_min_max_ms"),
            ms(&r["python_median_step_ms"]),
            range("python_min_max_ms"),
            r["python_over_tch"].as_f64().map_or("—".into(), show_ratio),
        );
    }
    s += &format!(
        "\n  tch: libtorch {} (threads {}); python: {} torch {} (threads {})",
        versions["libtorch"].as_str().unwrap_or("?"),
        versions["tch_torch_threads"],
        versions["python"].as_str().unwrap_or("?"),
        versions["python_torch"].as_str().unwrap_or("?"),
        versions["python_torch_threads"],
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tch_suite_is_one_compute_experiment_at_one_batch() {
        let s = tch_suite(256);
        assert!(s.contains("batch_sizes = [256]"), "{s}");
        assert!(s.contains(&format!("torch_threads = {THREADS}")), "{s}");
        assert!(s.contains(&format!("steps = {STEPS}")), "{s}");
    }

    #[test]
    fn the_table_fits_100_columns() {
        let row = json!({"batch": 256, "tch_median_step_ms": 151.234,
            "tch_min_max_ms": [140.0, 160.5], "python_median_step_ms": 1523.0,
            "python_min_max_ms": [1400.25, 1600.75], "python_over_tch": 1.07});
        let v = json!({"libtorch": "2.11.0", "tch_torch_threads": 1, "python": "3.11.7",
            "python_torch": "2.11.0+cu130", "python_torch_threads": 1});
        let text = render(&[row], &v);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(text.contains("1.07×"), "{text}");
        assert!(
            text.contains("\n    256    151.23 "),
            "columns line up: {text}"
        );
    }
}
