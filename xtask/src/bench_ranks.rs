//! `cargo xtask bench ranks [WORLD]`: a site of many rank bundles stays
//! fast. It generates WORLD (default 1,024; 16,384 for the largest jobs)
//! per-rank bundles (a loader experiment of three configurations, each rank
//! with a whole-run epoch and a diagnostic one of a few hundred steps with
//! comm; `xtask/src/web/rank_bundles.rs`), times the release runner's
//! `stallscope merge DIR` (format 1.3: the job's figures and the ranks'
//! columns in the bundle, every rank's steps in `*.ssrs` sidecars) beside
//! reading the same files' bytes, exports a site of the merged bundle with
//! its sidecars and times, in headless Chromium, navigation → the merged
//! bundle's summary rendered and → the per-rank view drawn (its sidecar
//! fetched), beside the browser's own `JSON.parse` of the same file; then
//! finds the slowed rank with the rank search. Medians of 3 or more;
//! targets printed met / NOT met, the 1,024-rank figures held to the ones
//! before format 1.3; the printed report is saved in
//! `fixtures/bench/ranks.txt` (1,024) or `fixtures/bench/ranks-WORLD.txt`.
//! The per-rank bundles are written indented, as the runner writes them.
use crate::bench_goals::{Spread, verdict};
use crate::cmd::Cmd;
use crate::web::rank_bundles::{EXPERIMENT, RankSpec, merged_id};
use crate::web::{Server, export_site};
use anyhow::{Context, Result, ensure};
use serde_json::json;
use stallscope_e2e::webdriver::Browser;
use std::path::{Path, PathBuf};
use std::time::Instant;

const STEPS: usize = 300;
const ID: &str = "bench-ranks";
const REPEATS: usize = 3;
const MERGE_TARGET_S: f64 = 10.0;
const SUMMARY_TARGET_MS: f64 = 2000.0;
const RANKS_TARGET_MS: f64 = 3000.0;
/// The 1,024-rank figures before format 1.3 (fixtures/bench/ranks.txt of
/// issue 11): merge, summary, per-rank view; a 1,024-rank run must not be
/// slower.
const BEFORE_1024: (f64, f64, f64) = (0.89, 908.0, 1026.0);

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

/// The report: printed as it goes, saved at the end.
struct Out(Vec<String>);

impl Out {
    fn line(&mut self, s: impl Into<String>) {
        let s = s.into();
        println!("{s}");
        self.0.push(s);
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// "label 1.23 s (median of 3: 1.23, 1.30, 1.20)", `d` decimals.
fn spread(label: &str, unit: &str, d: usize, v: &[f64]) -> Result<String> {
    let s = Spread::of(v)?;
    let all: Vec<String> = v.iter().map(|x| format!("{x:.d$}")).collect();
    Ok(format!(
        "{label} {:.d$} {unit} (median of {}: {})",
        s.median,
        s.n,
        all.join(", ")
    ))
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
    let spec = spec(world);
    let dist = crate::web::build_dist(repo)?;
    let runner = crate::demo::release_runner(repo, Some(&dist))?;
    let mut out = Out(Vec::new());
    let work = tempfile::Builder::new()
        .prefix("stallscope-bench-ranks-")
        .tempdir()?;
    let dir = work.path().join("ranks");
    std::fs::create_dir_all(&dir)?;
    let t = Instant::now();
    let mut files = Vec::new();
    let mut bytes = 0u64;
    for (r, b) in crate::web::rank_bundles::per_rank_bundles(&spec, ID).enumerate() {
        let path = dir.join(format!("bundle.rank-{r}.json"));
        // Indented, as every rank's `stallscope run` writes its bundle.
        let text = b.to_json_pretty().into_bytes();
        bytes += text.len() as u64;
        std::fs::write(&path, text)?;
        files.push(path);
    }
    out.line(format!(
        "bench ranks: {} generated per-rank bundles, {} in all, written in {:.1} s",
        files.len(),
        mb(bytes),
        t.elapsed().as_secs_f64()
    ));
    out.line(format!(
        "  each: 3 configurations × (whole-run + diagnostic of {} steps with comm), rank {} slowed",
        spec.steps, spec.slow_rank
    ));
    let merged = work.path().join("merged/merged.json");
    let merge_s = merge_half(&mut out, &runner, &spec, &dir, &files, &merged)?;
    let merged = loadable(&mut out, work.path(), &merged)?;
    let (summary, ranks) = viewer_half(&mut out, &runner, &spec, work.path(), &merged)?;
    if world == 1024 {
        let (m, s, r) = BEFORE_1024;
        out.line(format!(
            "  target: no worse than before format 1.3 ({m:.2} s merge, {s:.0} ms summary, \
             {r:.0} ms per-rank view): {}",
            verdict(merge_s <= m * 1.1 && summary <= s * 1.1 && ranks <= r * 1.1)
        ));
    }
    let report = repo.join(report_path(world));
    std::fs::write(&report, out.0.join("\n") + "\n")
        .with_context(|| format!("cannot write {}", report.display()))?;
    println!("saved in {}", report.display());
    Ok(())
}

/// `stallscope merge DIR --out FILE`, timed, beside reading the files' bytes.
fn merge_half(
    out: &mut Out,
    runner: &Path,
    spec: &RankSpec,
    dir: &Path,
    files: &[PathBuf],
    merged: &Path,
) -> Result<f64> {
    let mut read = Vec::new();
    let mut merge = Vec::new();
    for _ in 0..REPEATS {
        let t = Instant::now();
        let mut n = 0usize;
        for f in files {
            n += std::fs::read(f)?.len();
        }
        std::hint::black_box(n);
        read.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        Cmd::new(runner)
            .arg("merge")
            .arg(dir)
            .arg("--out")
            .arg(merged)
            .read()
            .context("stallscope merge failed")?;
        merge.push(t.elapsed().as_secs_f64());
    }
    let size = std::fs::metadata(merged)?.len();
    let sidecars: Vec<u64> = sidecars_of(merged)?
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()))
        .collect::<std::io::Result<_>>()?;
    out.line(format!(
        "\nmerge (release runner, {} cores), {REPEATS} runs each:",
        cores()
    ));
    out.line(format!(
        "  {}",
        spread("stallscope merge DIR:", "s", 2, &merge)?
    ));
    out.line(format!(
        "  {}",
        spread("baseline, reading the files' bytes:", "s", 2, &read)?
    ));
    out.line(format!(
        "  merged bundle: {} (format 1.3); {} sidecar files beside it, {}",
        mb(size),
        sidecars.len(),
        mb(sidecars.iter().sum())
    ));
    let m = Spread::of(&merge)?.median;
    out.line(format!(
        "  target: merge of {} ranks under {MERGE_TARGET_S:.0} s: {}",
        spec.world,
        verdict(m < MERGE_TARGET_S)
    ));
    Ok(m)
}

/// The sidecar files `merge` wrote beside the merged bundle.
fn sidecars_of(merged: &Path) -> Result<Vec<PathBuf>> {
    let dir = merged.parent().context("the merged bundle has no folder")?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ssrs"))
        .collect();
    files.sort();
    Ok(files)
}

/// The merged bundle when the viewer can load it; else, saying so, the same
/// bundle re-written without indentation (the viewer half then measures
/// what a compact merge would give it).
fn loadable(out: &mut Out, work: &Path, merged: &Path) -> Result<PathBuf> {
    let size = std::fs::metadata(merged)?.len();
    let limit = stallscope_bundle::MAX_BUNDLE_BYTES as u64;
    out.line(format!(
        "  target: merged bundle within the viewer's limit of {}: {}",
        mb(limit),
        verdict(size <= limit)
    ));
    if size <= limit {
        return Ok(merged.to_path_buf());
    }
    let text = std::fs::read(merged)?;
    let bundle: stallscope_bundle::Bundle = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not a bundle", merged.display()))?;
    let compact = work.join("merged-compact.json");
    let text = serde_json::to_vec(&bundle)?;
    out.line(format!(
        "  merge writes indented JSON; without indentation the bundle is {}{}",
        mb(text.len() as u64),
        if text.len() as u64 <= limit {
            ": the viewer half uses that"
        } else {
            ", still over the limit"
        }
    ));
    ensure!(
        text.len() as u64 <= limit,
        "the merged bundle does not fit the viewer's limit even without indentation"
    );
    std::fs::write(&compact, text)?;
    Ok(compact)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// JS (async): performance.now() at the first animation frame on which the
/// condition holds — time since navigation started.
fn when(condition: &str) -> String {
    format!(
        "const done=arguments[arguments.length-1]; const ok=()=>{{ {condition} }}; \
         const poll=()=>{{ if (ok()) done(performance.now()); else requestAnimationFrame(poll); }}; poll();"
    )
}

/// The site of the merged bundle; navigation → summary, → per-rank view.
fn viewer_half(
    out: &mut Out,
    runner: &Path,
    spec: &RankSpec,
    work: &Path,
    merged: &Path,
) -> Result<(f64, f64)> {
    export_site(runner, &[merged.to_path_buf()], &work.join("site"))?;
    // What `stallscope site` should do itself: the sidecars beside the
    // bundle in the site (the lead's part, see the issue 20 report).
    for f in sidecars_of(merged)? {
        let name = f.file_name().context("a sidecar without a name")?;
        let to = work.join("site/bundles").join(name);
        if !to.exists() {
            std::fs::copy(&f, &to)?;
        }
    }
    let file = std::fs::read_dir(work.join("site/bundles"))?
        .filter_map(|e| e.ok())
        .map(|e| format!("bundles/{}", e.file_name().to_string_lossy()))
        .find(|n| n.ends_with(".json"))
        .context("the site has no bundle")?;
    let server = Server::start(runner, work)?;
    let browser = Browser::start(1280, 1000)?;
    let id = merged_id(ID);
    let summary = when(
        "return !document.querySelector('.pending') && !!document.querySelector('.rank-summary') \
         && document.querySelectorAll('.experiment-card .verdict').length > 0;",
    );
    let ranks = when(
        "const c=document.querySelector('.rank-view canvas.chart-canvas'); \
         return !!c && c.dataset.drawn==='1' && !!document.querySelector('.straggler-table tbody tr');",
    );
    let find = "const i=document.querySelector('#rank-find'); i.value=arguments[0]; \
        i.dispatchEvent(new Event('input',{bubbles:true}));";
    let mut times: Vec<(&str, Vec<f64>)> = vec![("summary", vec![]), ("ranks", vec![])];
    let mut parse = Vec::new();
    let mut straggler = String::new();
    for _ in 0..REPEATS {
        for (k, (hash, script)) in [
            (format!("#/b/{id}"), &summary),
            (format!("#/b/{id}/e/{EXPERIMENT}"), &ranks),
        ]
        .iter()
        .enumerate()
        {
            browser.goto("about:blank")?;
            browser.goto(&format!("{}site/{hash}", server.url))?;
            let ms = browser.eval_async(script, json!([]))?;
            times[k].1.push(ms.as_f64().context("no time")?);
        }
        straggler = browser
            .eval(
                "const r=document.querySelector('.straggler-table tbody tr th.rank'); return r ? r.textContent : '';",
                json!([]),
            )?
            .as_str()
            .unwrap_or_default()
            .to_string();
        let p = browser.eval_async(
            "const done=arguments[arguments.length-1]; fetch(arguments[0]).then(r=>r.text()).then(t=>{const t0=performance.now(); JSON.parse(t); done(performance.now()-t0);});",
            json!([file]),
        )?;
        parse.push(p.as_f64().context("no parse time")?);
    }
    // The rank search finds the slowed rank among all of them.
    browser.eval(find, json!([spec.slow_rank.to_string()]))?;
    let found = browser.wait_for(
        "the rank search",
        "const f=document.querySelector('.found-rank'); return f ? f.dataset.rank || 'none' : null;",
        std::time::Duration::from_secs(20),
    )?;
    // The viewer's own read (read_bundle: parse + validation), as it reports it.
    browser.goto(&format!("{}site/#/", server.url))?;
    let read = browser.wait_for(
        "the library",
        "const r=document.querySelector('.read-cost'); return r && !document.querySelector('.pending') ? r.textContent : null;",
        std::time::Duration::from_secs(60),
    )?;
    drop(server);
    ensure!(
        straggler == spec.slow_rank.to_string(),
        "the straggler table names rank {straggler:?} first, the generated slow rank is {}",
        spec.slow_rank
    );
    ensure!(
        found == json!(spec.slow_rank.to_string()),
        "the rank search for {} found {found}",
        spec.slow_rank
    );
    out.line(format!(
        "\nviewer, headless Chromium, navigation → rendered, {REPEATS} loads each:"
    ));
    out.line(format!(
        "  {}",
        spread("summary (bundle page, ranks listed):", "ms", 0, &times[0].1)?
    ));
    out.line(format!(
        "  {}",
        spread(
            "per-rank view (heat map, stragglers):",
            "ms",
            0,
            &times[1].1
        )?
    ));
    out.line(format!(
        "  {}",
        spread("baseline, browser JSON.parse of the file:", "ms", 0, &parse)?
    ));
    out.line(format!(
        "  the viewer's read_bundle of it (size, parse + validation): {}",
        read.as_str().unwrap_or_default()
    ));
    out.line(format!(
        "  the straggler table names rank {straggler} first (generated slow rank {}); \
         the rank search finds it",
        spec.slow_rank
    ));
    let s = Spread::of(&times[0].1)?.median;
    let r = Spread::of(&times[1].1)?.median;
    out.line(format!(
        "  target: summary of {} ranks under {:.0} s: {}",
        spec.world,
        SUMMARY_TARGET_MS / 1e3,
        verdict(s < SUMMARY_TARGET_MS)
    ));
    out.line(format!(
        "  target: per-rank view of {} ranks under {:.0} s: {}",
        spec.world,
        RANKS_TARGET_MS / 1e3,
        verdict(r < RANKS_TARGET_MS)
    ));
    Ok((s, r))
}
