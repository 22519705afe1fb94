//! `cargo xtask bench ranks [WORLD]`: a job of many ranks merges and opens
//! fast. It generates WORLD (default 1,024; 16,384 for the largest jobs)
//! per-rank bundles (a loader experiment of three configurations, each rank
//! with a whole-run epoch and a diagnostic one of 300 steps with comm;
//! `xtask/src/web/rank_bundles.rs`) written as a rank's `stallscope run`
//! writes them (one line), times the release runner's `stallscope merge
//! DIR` (wall and CPU) beside reading the same files' bytes, checks that the
//! merged bundle validates and that its sidecars decode against it, then
//! times, in headless Chromium, the summary and the per-rank view
//! (`bench_ranks/viewer.rs`) and looks for the slowed rank. Last, the same
//! bundles indented, as runners before issue 20 wrote them, merged once.
//! Medians of 3; targets printed met / NOT met, with the machine's load
//! average (the figures are only as quiet as the machine). A 1,024-rank run
//! is held to the figures `fixtures/bench/ranks.txt` held before it; the
//! report is saved in `fixtures/bench/ranks.txt` (1,024) or
//! `fixtures/bench/ranks-WORLD.txt`.
mod common;
mod viewer;

use crate::bench_goals::{Spread, verdict};
use crate::cmd::Cmd;
use crate::web::rank_bundles::{RankSpec, per_rank_bundles};
use anyhow::{Context, Result, bail, ensure};
use common::{ID, Out, REPEATS, sidecars_of, spread};
use std::path::{Path, PathBuf};
use std::time::Instant;

const STEPS: usize = 300;
const MERGE_TARGET_S: f64 = 10.0;
/// The 1,024-rank figures before format 1.3 (fixtures/bench/ranks.txt of
/// issue 11): merge s, summary ms, per-rank view ms; used when that file
/// holds none.
const BEFORE_1024: (f64, f64, f64) = (0.89, 908.0, 1026.0);
/// The labels of the figures a later run compares with (kept as they were).
const MERGE_LABEL: &str = "stallscope merge DIR:";
const SUMMARY_LABEL: &str = "summary (bundle page, ranks listed):";
const RANKS_LABEL: &str = "per-rank view (heat map, stragglers):";

/// The spec of a bench of `world` ranks: rank 700 of 1,024 slowed, the same
/// place in a larger world.
fn spec(world: u32) -> RankSpec {
    RankSpec {
        world,
        steps: STEPS,
        slow_rank: (world as u64 * 700 / 1024) as u32,
    }
}

fn report_path(world: u32) -> String {
    if world == 1024 {
        "fixtures/bench/ranks.txt".into()
    } else {
        format!("fixtures/bench/ranks-{world}.txt")
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The 1-minute load average (/proc/loadavg).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// CPU seconds (user + system) of this process's waited-for children
/// (/proc/self/stat's cutime and cstime, in USER_HZ = 100 ticks).
fn children_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(13).unwrap_or(&0.0) + f.get(14).unwrap_or(&0.0)) / 100.0
}

/// What the bench needs, checked before anything long starts: Chromium and
/// chromedriver, and libtorch for the release runner.
fn prerequisites(repo: &Path) -> Result<()> {
    if let Some(why) = stallscope_e2e::webdriver::missing() {
        bail!("bench ranks opens the merged bundle in headless Chromium: {why}");
    }
    let libtorch =
        std::env::var_os("LIBTORCH").map_or_else(|| repo.join(".libtorch"), PathBuf::from);
    ensure!(
        libtorch.join("lib").is_dir(),
        "bench ranks times the release runner, which links libtorch, and {} has none: run \
         `cargo xtask setup` (it installs libtorch, the wasm toolchain and Chromium)",
        libtorch.display()
    );
    Ok(())
}

pub(crate) fn run(repo: &Path, args: &[String]) -> Result<()> {
    let world: u32 = match args.first() {
        Some(a) => a
            .parse()
            .ok()
            .filter(|w| (2..=65_536).contains(w))
            .with_context(|| format!("{a}: expected a number of ranks, 2 to 65536"))?,
        None => 1024,
    };
    prerequisites(repo)?;
    let before = (world == 1024).then(|| before_1024(repo));
    let spec = spec(world);
    let dist = crate::web::build_dist(repo)
        .context("building the viewer (`cargo xtask setup` installs the wasm toolchain)")?;
    let runner = crate::demo::release_runner(repo, Some(&dist))
        .context("building the release runner (`cargo xtask setup` installs libtorch)")?;
    let mut out = Out(Vec::new());
    let date = Cmd::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .read()?;
    out.line(format!(
        "bench ranks: {world} ranks; {}, {} cores, load average {} at the start",
        date.trim(),
        cores(),
        load()
    ));
    let work = tempfile::Builder::new()
        .prefix("stallscope-bench-ranks-")
        .tempdir()?;
    let dir = work.path().join("ranks");
    let files = generate(&mut out, &spec, &dir, false)?;
    let merged = work.path().join("merged/merged.json");
    let merge_s = merge_half(&mut out, &runner, &spec, &dir, &files, &merged)?;
    let valid = check_merged(&mut out, &runner, &merged)?;
    let v = viewer::run(&mut out, &runner, &spec, work.path(), &merged)?;
    older_runners(&mut out, &runner, &spec, &dir, &merged)?;
    if let Some(before) = before {
        compare_1024(&mut out, before, (merge_s, v.summary_ms, v.ranks_ms));
    }
    out.line(format!("load average {} at the end", load()));
    let report = repo.join(report_path(world));
    std::fs::write(&report, out.0.join("\n") + "\n")
        .with_context(|| format!("cannot write {}", report.display()))?;
    println!("saved in {}", report.display());
    ensure!(
        valid,
        "the merged bundle or its sidecars did not check (above)"
    );
    ensure!(v.named_first, "the slowed rank was not named first (above)");
    Ok(())
}

/// Write every rank's bundle into `dir`: one line as `stallscope run` writes
/// a rank's bundle now, or indented as runners before issue 20 did.
fn generate(out: &mut Out, spec: &RankSpec, dir: &Path, indented: bool) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let t = Instant::now();
    let mut files = Vec::new();
    let mut bytes = 0u64;
    for (r, b) in per_rank_bundles(spec, ID).enumerate() {
        let path = dir.join(format!("bundle.rank-{r}.json"));
        let mut text = if indented {
            b.to_json_pretty().into_bytes()
        } else {
            serde_json::to_vec(&b)?
        };
        text.push(b'\n');
        bytes += text.len() as u64;
        std::fs::write(&path, text)?;
        files.push(path);
    }
    let how = if indented {
        "indented"
    } else {
        "one line each, as ranks write them"
    };
    out.line(format!(
        "  {} generated per-rank bundles ({how}): {}, written in {:.1} s",
        files.len(),
        mb(bytes),
        t.elapsed().as_secs_f64()
    ));
    if !indented {
        out.line(format!(
            "  each: 3 configurations × (whole-run + diagnostic of {} steps with comm), rank {} slowed",
            spec.steps, spec.slow_rank
        ));
    }
    Ok(files)
}

/// One `stallscope merge DIR --out FILE`: (wall s, CPU s of the command).
fn merge_once(runner: &Path, dir: &Path, merged: &Path) -> Result<(f64, f64)> {
    let (t, cpu) = (Instant::now(), children_cpu_s());
    Cmd::new(runner)
        .arg("merge")
        .arg(dir)
        .arg("--out")
        .arg(merged)
        .read()
        .context("stallscope merge failed")?;
    Ok((t.elapsed().as_secs_f64(), children_cpu_s() - cpu))
}

/// `stallscope merge`, timed, beside reading the files' bytes.
fn merge_half(
    out: &mut Out,
    runner: &Path,
    spec: &RankSpec,
    dir: &Path,
    files: &[PathBuf],
    merged: &Path,
) -> Result<f64> {
    let (mut read, mut wall, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    let mut start = Vec::new();
    for _ in 0..REPEATS {
        let t = Instant::now();
        Cmd::new(runner).arg("--version").read()?;
        start.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut n = 0usize;
        for f in files {
            n += std::fs::read(f)?.len();
        }
        std::hint::black_box(n);
        read.push(t.elapsed().as_secs_f64());
        let (w, c) = merge_once(runner, dir, merged)?;
        wall.push(w);
        cpu.push(c);
    }
    let size = std::fs::metadata(merged)?.len();
    let sidecars = sidecars_of(merged)?;
    let sidecar_bytes = sidecars
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()));
    let sidecar_bytes: u64 = sidecar_bytes
        .collect::<std::io::Result<Vec<u64>>>()?
        .iter()
        .sum();
    out.line(format!(
        "\nmerge (release runner, {} cores), {REPEATS} runs each:",
        cores()
    ));
    out.line(format!("  {}", spread(MERGE_LABEL, "s", 2, &wall)?));
    let lines = [
        spread("its CPU time (user + system):", "s", 1, &cpu)?,
        spread(
            "of it, starting the runner (--version, libtorch loads):",
            "s",
            2,
            &start,
        )?,
        spread("baseline, reading the files' bytes:", "s", 2, &read)?,
    ];
    for line in lines {
        out.line(format!("  {line}"));
    }
    out.line(format!(
        "  merged bundle: {} (format 1.3); {} sidecar files beside it, {}",
        mb(size),
        sidecars.len(),
        mb(sidecar_bytes)
    ));
    let m = Spread::of(&wall)?.median;
    out.line(format!(
        "  target: merge of {} ranks under {MERGE_TARGET_S:.0} s: {}",
        spec.world,
        verdict(m < MERGE_TARGET_S)
    ));
    Ok(m)
}

/// `stallscope validate` of the merged bundle, its size against the
/// viewer's limit, and every sidecar it names decoded against its record.
fn check_merged(out: &mut Out, runner: &Path, merged: &Path) -> Result<bool> {
    let validate = Cmd::new(runner).arg("validate").arg(merged).read();
    let limit = stallscope_bundle::MAX_BUNDLE_BYTES as u64;
    let size = std::fs::metadata(merged)?.len();
    let bundle = stallscope_bundle::read_bundle(&std::fs::read(merged)?);
    let (mut named, mut bad) = (0, Vec::new());
    if let Ok(b) = &bundle {
        let folder = merged.parent().context("the merged bundle has no folder")?;
        let records = b.experiments.iter().flat_map(|e| &e.configurations);
        for record in records.flat_map(|c| c.ranks.iter().flat_map(|r| &r.sidecars)) {
            named += 1;
            let bytes = std::fs::read(folder.join(&record.file)).unwrap_or_default();
            if let Err(e) = stallscope_bundle::sidecar::decode_for(&bytes, record, &b.id) {
                bad.push(format!("{}: {e}", record.file));
            }
        }
    }
    let valid = validate.is_ok() && bundle.is_ok() && bad.is_empty();
    out.line(format!(
        "  target: merged bundle valid (stallscope validate), its {named} sidecars decode \
         against it: {}",
        verdict(valid)
    ));
    for problem in validate
        .err()
        .map(|e| format!("{e:#}"))
        .into_iter()
        .chain(bad)
    {
        out.line(format!("    {problem}"));
    }
    out.line(format!(
        "  target: merged bundle within the viewer's limit of {}: {}",
        mb(limit),
        verdict(size <= limit)
    ));
    Ok(valid)
}

/// The same ranks as runners before issue 20 wrote them (indented), merged
/// once: they still merge, and what the one-line files save.
fn older_runners(
    out: &mut Out,
    runner: &Path,
    spec: &RankSpec,
    dir: &Path,
    merged: &Path,
) -> Result<()> {
    out.line("\nthe same ranks indented, as runners before issue 20 wrote them:");
    std::fs::remove_dir_all(dir)?;
    generate(out, spec, dir, true)?;
    let again = merged.with_file_name("merged-indented.json");
    let (wall, cpu) = merge_once(runner, dir, &again)?;
    let same = std::fs::read(merged)? == std::fs::read(&again)?;
    out.line(format!(
        "  stallscope merge: {wall:.2} s, CPU {cpu:.1} s (1 run); the merged bundle {}",
        if same {
            "is byte for byte the one above"
        } else {
            "DIFFERS from the one above"
        }
    ));
    Ok(())
}

/// The merge, summary and per-rank figures `fixtures/bench/ranks.txt` holds
/// before this run rewrites it, and where they come from.
fn before_1024(repo: &Path) -> ((f64, f64, f64), String) {
    let text = std::fs::read_to_string(repo.join(report_path(1024))).unwrap_or_default();
    let figure = |label: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.trim_start().starts_with(label))?;
        let rest = line.trim_start().strip_prefix(label)?;
        rest.split_whitespace().next()?.parse().ok()
    };
    match (
        figure(MERGE_LABEL),
        figure(SUMMARY_LABEL),
        figure(RANKS_LABEL),
    ) {
        (Some(m), Some(s), Some(r)) => {
            ((m, s, r), "fixtures/bench/ranks.txt before this run".into())
        }
        _ => (BEFORE_1024, "issue 11's fixtures/bench/ranks.txt".into()),
    }
}

/// A 1,024-rank run against the figures before it, each within 10%.
fn compare_1024(out: &mut Out, before: ((f64, f64, f64), String), now: (f64, f64, f64)) {
    let ((m, s, r), source) = before;
    let (nm, ns, nr) = now;
    out.line(format!(
        "\nagainst {source}:\n  merge {m:.2} → {nm:.2} s, summary {s:.0} → {ns:.0} ms, \
         per-rank view {r:.0} → {nr:.0} ms"
    ));
    out.line(format!(
        "  target: no worse (each within 10%): {}",
        verdict(nm <= m * 1.1 && ns <= s * 1.1 && nr <= r * 1.1)
    ));
}
