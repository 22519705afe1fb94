//! The viewer half of `cargo xtask bench ranks`: a site of the merged bundle
//! (with its sidecars) served by the release runner, and in headless
//! Chromium, navigation → the merged bundle's summary rendered and → the
//! per-rank view drawn (its sidecar fetched), beside the browser's own
//! `JSON.parse` of the same file; then the straggler table's first rank and
//! the rank search for the slowed rank.
use super::common::{ID, Out, REPEATS, sidecars_of, spread};
use crate::bench_goals::{Spread, verdict};
use crate::web::rank_bundles::{EXPERIMENT, RankSpec, merged_id};
use crate::web::{Server, export_site};
use anyhow::{Context, Result};
use serde_json::json;
use stallscope_e2e::webdriver::Browser;
use std::path::Path;
use std::time::Duration;

const SUMMARY_TARGET_MS: f64 = 2000.0;
const RANKS_TARGET_MS: f64 = 3000.0;

/// What the viewer half found.
pub(super) struct Viewer {
    /// Medians, ms.
    pub summary_ms: f64,
    pub ranks_ms: f64,
    /// Whether the straggler table and the rank search named the slowed rank.
    pub named_first: bool,
}

/// JS (async): performance.now() at the first animation frame on which the
/// condition holds — time since navigation started.
fn when(condition: &str) -> String {
    format!(
        "const done=arguments[arguments.length-1]; const ok=()=>{{ {condition} }}; \
         const poll=()=>{{ if (ok()) done(performance.now()); else requestAnimationFrame(poll); }}; poll();"
    )
}

/// The site of `merged` in `work/site`, the sidecars beside the bundle;
/// returns the bundle's path in the site.
fn site(runner: &Path, work: &Path, merged: &Path) -> Result<String> {
    export_site(runner, &[merged.to_path_buf()], &work.join("site"))?;
    // `stallscope site` copies them itself; a runner that did not gets them here.
    for f in sidecars_of(merged)? {
        let name = f.file_name().context("a sidecar without a name")?;
        let to = work.join("site/bundles").join(name);
        if !to.exists() {
            std::fs::copy(&f, &to)?;
        }
    }
    std::fs::read_dir(work.join("site/bundles"))?
        .filter_map(|e| e.ok())
        .map(|e| format!("bundles/{}", e.file_name().to_string_lossy()))
        .find(|n| n.ends_with(".json"))
        .context("the site has no bundle")
}

/// Per load: (summary ms, per-rank view ms, JSON.parse ms); and the straggler
/// table's first rank after the last load.
fn loads(browser: &Browser, url: &str, id: &str, file: &str) -> Result<([Vec<f64>; 3], String)> {
    let summary = when(
        "return !document.querySelector('.pending') && !!document.querySelector('.rank-summary') \
         && document.querySelectorAll('.experiment-card .verdict').length > 0;",
    );
    let ranks = when(
        "const c=document.querySelector('.rank-view canvas.chart-canvas'); \
         return !!c && c.dataset.drawn==='1' && !!document.querySelector('.straggler-table tbody tr');",
    );
    let pages = [
        (format!("#/b/{id}"), summary),
        (format!("#/b/{id}/e/{EXPERIMENT}"), ranks),
    ];
    let mut times: [Vec<f64>; 3] = Default::default();
    let mut straggler = String::new();
    for _ in 0..REPEATS {
        for (k, (hash, script)) in pages.iter().enumerate() {
            browser.goto("about:blank")?;
            browser.goto(&format!("{url}site/{hash}"))?;
            let ms = browser.eval_async(script, json!([]))?;
            times[k].push(ms.as_f64().context("no time")?);
        }
        straggler = browser
            .eval(
                "const r=document.querySelector('.straggler-table tbody tr th.rank'); \
                 return r ? r.textContent : '';",
                json!([]),
            )?
            .as_str()
            .unwrap_or_default()
            .to_string();
        let p = browser.eval_async(
            "const done=arguments[arguments.length-1]; fetch(arguments[0]).then(r=>r.text())\
             .then(t=>{const t0=performance.now(); JSON.parse(t); done(performance.now()-t0);});",
            json!([file]),
        )?;
        times[2].push(p.as_f64().context("no parse time")?);
    }
    Ok((times, straggler))
}

/// The rank search's answer for `rank` on the per-rank view now open.
fn search(browser: &Browser, rank: u32) -> Result<String> {
    browser.eval(
        "const i=document.querySelector('#rank-find'); i.value=arguments[0]; \
         i.dispatchEvent(new Event('input',{bubbles:true}));",
        json!([rank.to_string()]),
    )?;
    let found = browser.wait_for(
        "the rank search",
        "const f=document.querySelector('.found-rank'); return f ? f.dataset.rank || 'none' : null;",
        Duration::from_secs(20),
    )?;
    Ok(found.as_str().unwrap_or_default().to_string())
}

/// Serve the site of `merged`, time the two pages, look for the slowed rank.
pub(super) fn run(
    out: &mut Out,
    runner: &Path,
    spec: &RankSpec,
    work: &Path,
    merged: &Path,
) -> Result<Viewer> {
    let file = site(runner, work, merged)?;
    let server = Server::start(runner, work)?;
    let browser = Browser::start(1280, 1000)?;
    let (times, straggler) = loads(&browser, &server.url, &merged_id(ID), &file)?;
    let found = search(&browser, spec.slow_rank)?;
    // The viewer's own read (read_bundle: parse + validation), as it reports it.
    browser.goto(&format!("{}site/#/", server.url))?;
    let read = browser.wait_for(
        "the library",
        "const r=document.querySelector('.read-cost'); \
         return r && !document.querySelector('.pending') ? r.textContent : null;",
        Duration::from_secs(60),
    )?;
    drop(server);
    out.line(format!(
        "\nviewer, headless Chromium, navigation → rendered, {REPEATS} loads each:"
    ));
    let labels = [
        "summary (bundle page, ranks listed):",
        "per-rank view (heat map, stragglers):",
        "baseline, browser JSON.parse of the file:",
    ];
    for (label, t) in labels.iter().zip(&times) {
        out.line(format!("  {}", spread(label, "ms", 0, t)?));
    }
    out.line(format!(
        "  the viewer's read_bundle of it (size, parse + validation): {}",
        read.as_str().unwrap_or_default()
    ));
    let slow = spec.slow_rank.to_string();
    let named_first = straggler == slow && found == slow;
    out.line(format!(
        "  the straggler table names rank {straggler} first; the rank search for {slow} finds {found}"
    ));
    let (s, r) = (Spread::of(&times[0])?.median, Spread::of(&times[1])?.median);
    let world = spec.world;
    out.line(format!(
        "  target: the generated slow rank {slow} named first: {}",
        verdict(named_first)
    ));
    out.line(format!(
        "  target: summary of {world} ranks under {:.0} s: {}",
        SUMMARY_TARGET_MS / 1e3,
        verdict(s < SUMMARY_TARGET_MS)
    ));
    out.line(format!(
        "  target: per-rank view of {world} ranks under {:.0} s: {}",
        RANKS_TARGET_MS / 1e3,
        verdict(r < RANKS_TARGET_MS)
    ));
    Ok(Viewer {
        summary_ms: s,
        ranks_ms: r,
        named_first,
    })
}
