//! `cargo xtask bench loader-peers`: the native loader against PyTorch's DataLoader, SPDL, NVIDIA
//! DALI (CPU operators) and torchdata.nodes on the JPEG pipeline of
//! `fixtures/bench/loader-peers.toml`, in one release run whose repeats interleave the engines;
//! prints each engine's best configuration and native's ratio to each. Around the
//! suite (before and after it, same build) it runs `stallscope bare-images`: the bare per-image
//! function on one thread, whose rate × cores is the limit the loader is held to, and whose
//! untimed and timed passes measure the stage clocks' overhead. The goals block reports each
//! goal as met or NOT met; a missed goal does not fail the bench, a failed run or a missing
//! number does.
use crate::bench_best::{Best, ENGINES, best_per_engine, rate};
use crate::bench_goals::{Bare, goals, parse_bare, render_goals};
use crate::cmd::Cmd;
use crate::demo::release_runner;
use crate::paths::target_dir;
use anyhow::{Context, Result, ensure};
use serde_json::Value;
use stallscope_bundle::analysis::{show_bytes, show_ratio};
use stallscope_bundle::{Bundle, Engine, read_bundle};
use std::path::Path;

const SUITE: &str = "fixtures/bench/loader-peers.toml";
const KEPT: &str = "fixtures/bench/loader-peers.json";
const KEPT_BARE: &str = "fixtures/bench/loader-peers-bare.json";
/// Passes of each `bare-images` run: alternately untimed and timed.
const BARE_PASSES: u32 = 4;

/// `stallscope run SUITE --device cpu --out OUT` with this checkout's peers harness, into a
/// fresh OUT; returns the bundle read back.
pub(crate) fn run_suite(repo: &Path, exe: &Path, suite: &Path, out: &Path) -> Result<Bundle> {
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("removing {}", out.display()))?;
    }
    Cmd::new(exe)
        .env("STALLSCOPE_HARNESS_DIR", repo.join("python"))
        .arg("run")
        .arg(suite)
        .args(["--device", "cpu", "--out"])
        .arg(out)
        .run()?;
    let path = out.join("bundle.json");
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    read_bundle(&bytes).with_context(|| format!("reading {}", path.display()))
}

/// `stallscope bare-images SUITE --passes N`, parsed; `when` names the run in errors.
fn run_bare(exe: &Path, suite: &Path, when: &str) -> Result<(Bare, Value)> {
    eprintln!(
        "$ {} bare-images {} --passes {BARE_PASSES}   ({when})",
        exe.display(),
        suite.display()
    );
    let text = Cmd::new(exe)
        .arg("bare-images")
        .arg(suite)
        .args(["--passes", &BARE_PASSES.to_string()])
        .read()
        .with_context(|| format!("bare-images {when}"))?;
    parse_bare(&text).with_context(|| format!("bare-images {when}: its JSON"))
}

pub(crate) fn run(repo: &Path) -> Result<()> {
    let exe = release_runner(repo, None)?;
    let suite = repo.join(SUITE);
    let out = target_dir(repo).join("bench").join("loader-peers");
    let (before, before_json) = run_bare(&exe, &suite, "before the suite")?;
    let bundle = run_suite(repo, &exe, &suite, &out)?;
    let (after, after_json) = run_bare(&exe, &suite, "after the suite")?;
    let rows = best_per_engine(&bundle)?;
    println!("{}", render(&rows));
    let bundle_path = out.join("bundle.json");
    let experiment = bundle.experiments.first().map(|e| e.id.as_str());
    ensure!(
        experiment == Some(before.experiment.as_str()),
        "bare-images measured experiment {:?} but the bundle's is {experiment:?} ({})",
        before.experiment,
        bundle_path.display()
    );
    let cores = std::thread::available_parallelism()
        .context("std::thread::available_parallelism (the cores of the limit)")?
        .get();
    // Before keeping anything: a missing number fails here, leaving the kept files as they were.
    let goals = goals(&rows, &before, &after, cores)
        .with_context(|| format!("the goals of {}", bundle_path.display()))?;
    std::fs::copy(&bundle_path, repo.join(KEPT))
        .with_context(|| format!("copying the bundle to {KEPT}"))?;
    let bare = serde_json::json!({ "before": before_json, "after": after_json });
    std::fs::write(
        repo.join(KEPT_BARE),
        serde_json::to_string_pretty(&bare)? + "\n",
    )
    .with_context(|| format!("writing {KEPT_BARE}"))?;
    println!("{}", render_goals(&goals));
    println!("bundle: {} (kept as {KEPT})", bundle_path.display());
    println!("bare-images, before and after the suite: kept as {KEPT_BARE}");
    Ok(())
}

/// The summary table (under 100 columns) and the two ratios.
pub(crate) fn render(rows: &[Best]) -> String {
    let mut s = String::from(
        "loader-peers: best configuration per engine, images/s (whole-run, steady; median of the\n\
         repeats, [min–max]); peak host RSS = max of the runs' host_peak_rss_bytes\n\n",
    );
    s += &format!(
        "  {:<8} {:<30} {:>9} {:>19} {:>14}\n",
        "engine", "best configuration", "images/s", "[min–max]", "peak host RSS"
    );
    s += &format!("  {}\n", "-".repeat(84));
    for r in rows {
        match &r.best {
            Some(b) => {
                s += &format!(
                    "  {:<8} {:<30} {:>9} {:>19} {:>14}\n",
                    r.engine.as_str(),
                    truncate(&b.label, 30),
                    rate(b.median),
                    format!("[{}–{}] n={}", rate(b.min), rate(b.max), b.runs),
                    b.peak_rss.map_or("—".into(), |v| show_bytes(v as f64)),
                );
            }
            None => {
                s += &format!(
                    "  {:<8} no configuration with a whole-run steady figure (see the report)\n",
                    r.engine.as_str()
                );
            }
        }
    }
    let median = |e: &Engine| {
        rows.iter()
            .find(|r| r.engine == *e)
            .and_then(|r| r.best.as_ref())
            .map(|b| b.median)
    };
    let ratios: Vec<String> = ENGINES[1..]
        .iter()
        .map(|other| {
            let r = match (median(&Engine::Native), median(other)) {
                (Some(n), Some(o)) if o > 0.0 => show_ratio(n / o),
                _ => "—".into(),
            };
            format!("{} {r}", other.as_str())
        })
        .collect();
    s += &format!(
        "\n  native ÷ each, of the best medians: {}\n",
        ratios.join(", ")
    );
    s += "  RSS is the process that ran the loop (runner or Python harness, DALI's threads in it);\n  \
          worker processes' own memory is not in it (PyTorch's, nodes' and native processes').";
    s
}

/// `s` cut to `n` characters, the last one `…` when cut.
fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_bundle::Phase;

    fn bundle() -> Bundle {
        let path = crate::paths::repo_root().join("fixtures/published/spdl-paper.json");
        read_bundle(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn the_best_of_each_engine_is_its_highest_median() {
        // The published bundle has only cold runs: no steady figure for any engine.
        let rows = best_per_engine(&bundle()).unwrap();
        assert_eq!(rows.len(), 5);
        assert!(rows.iter().all(|r| r.best.is_none()));
        let mut b = bundle();
        for c in &mut b.experiments[0].configurations {
            for r in &mut c.runs {
                r.phase = Phase::Steady;
            }
        }
        let rows = best_per_engine(&b).unwrap();
        assert!(rows[0].best.is_none(), "no native configuration");
        assert_eq!(rows[1].best.as_ref().unwrap().median, 446.48);
        assert_eq!(rows[2].best.as_ref().unwrap().median, 1763.82);
        let text = render(&rows);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(
            text.contains("pytorch —, spdl —, dali —, nodes —"),
            "{text}"
        );
        assert!(
            rows[3].best.is_none() && rows[4].best.is_none(),
            "no dali nor nodes"
        );
    }
}
