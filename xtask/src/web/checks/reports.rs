//! Browser checks of what a report shows: table cells against the fixture,
//! the sweet spot, drawn charts (and sharp at devicePixelRatio 2), the
//! explanations, permalinks, exports, the OOM check and stall attribution.
use super::ctx::*;
use anyhow::{Context, Result, bail, ensure};
use serde_json::json;
use std::time::Duration;

pub(super) fn table_cells_equal_the_fixture(ctx: &Ctx) -> Result<()> {
    ctx.open_experiment(&ctx.published_id, "batch_sweep")?;
    let rate_col = ctx.column("samples/s (whole-run")?;
    let epoch_col = ctx.column("epoch (whole-run")?;
    let exp = &ctx.published["experiments"][0];
    let configs = exp["configurations"]
        .as_array()
        .context("fixture has no configurations")?;
    for c in configs {
        let id = c["id"].as_str().unwrap_or_default();
        let w = &c["runs"][0]["whole_run"];
        let rate = w["samples_per_s"].as_f64().context("fixture rate")?;
        let seconds = w["seconds"].as_f64().context("fixture seconds")?;
        let want_rate = format!("{}/s", grouped(rate.round() as u64));
        // One time unit per table: the epoch reads in the step's ms (every
        // epoch here is over 1,000 ms: whole ms keep three digits).
        let want_epoch = format!("{} ms", grouped((seconds * 1e3).round() as u64));
        let got_rate = ctx.text(&format!(
            "td[data-config='{id}'][data-col='{rate_col}'] .value"
        ))?;
        let got_epoch = ctx.text(&format!(
            "td[data-config='{id}'][data-col='{epoch_col}'] .value"
        ))?;
        ensure!(
            got_rate == want_rate,
            "{id}: samples/s cell shows {got_rate:?}, the fixture says {want_rate:?}"
        );
        ensure!(
            got_epoch == want_epoch,
            "{id}: epoch cell shows {got_epoch:?}, the fixture says {want_epoch:?}"
        );
    }
    // The best throughput is marked.
    let best = ctx.browser.eval(
        "const c=document.querySelector(`td.best[data-col='${arguments[0]}']`); return c ? c.dataset.config : null;",
        json!([rate_col]),
    )?;
    ensure!(
        best == json!("bs2048"),
        "the best samples/s should be marked on bs2048 (37,332/s), found {best}"
    );
    ctx.shot("experiment-published")
}

pub(super) fn sweet_spot_shown(ctx: &Ctx) -> Result<()> {
    // Independently of the analysis: the smallest batch reaching 95% of the best rate.
    let configs = ctx.published["experiments"][0]["configurations"]
        .as_array()
        .context("configurations")?;
    let points: Vec<(u64, f64)> = configs
        .iter()
        .filter_map(|c| {
            Some((
                c["params"]["batch_size"].as_u64()?,
                c["runs"][0]["whole_run"]["samples_per_s"].as_f64()?,
            ))
        })
        .collect();
    let best = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let spot = points
        .iter()
        .filter(|p| p.1 >= 0.95 * best)
        .map(|p| p.0)
        .min()
        .context("no sweet spot")?;
    ctx.open_experiment(&ctx.published_id, "batch_sweep")?;
    let verdict = ctx.text(".verdict-box .verdict")?;
    let want = format!("batch_size {spot} ");
    ensure!(
        verdict.contains("Sweet spot") && verdict.contains(&want),
        "the verdict should name the sweet spot batch_size {spot}: {verdict:?}"
    );
    ctx.open(&format!("#/how/{}", ctx.published_id))?;
    let how = ctx.text(".own-numbers.sweet-spot")?;
    ensure!(
        how.contains(&want),
        "\"How to read this\" should give the sweet spot batch_size {spot} from the bundle: {how:?}"
    );
    ctx.shot("how-to-read")
}

pub(super) fn charts_drawn(ctx: &Ctx) -> Result<()> {
    let steps_id = STEPS_ID.to_string();
    for (bundle, exp, want) in [
        (&ctx.published_id, "batch_sweep", 1),
        (&ctx.measured_id, "batch_sweep", 3),
        (&steps_id, "loader", 2),
    ] {
        ctx.open_experiment(bundle, exp)?;
        let v = ctx.browser.eval(
            "return [...document.querySelectorAll('canvas.chart-canvas')].map(c=>{const d=c.getContext('2d').getImageData(0,0,c.width,c.height).data; let ink=0; for(let i=0;i<d.length;i+=4){ if(d[i+3]>0 && (d[i]<200||d[i+1]<200||d[i+2]<200)) ink++; } return {id:c.id, w:c.width, h:c.height, css:c.clientWidth, ink};});",
            json!([]),
        )?;
        let charts = v.as_array().context("no chart list")?;
        ensure!(
            charts.len() >= want,
            "{bundle}/{exp}: expected at least {want} charts, found {}",
            charts.len()
        );
        for c in charts {
            let (w, h, ink) = (
                c["w"].as_f64().unwrap_or(0.0),
                c["h"].as_f64().unwrap_or(0.0),
                c["ink"].as_f64().unwrap_or(0.0),
            );
            ensure!(
                w > 0.0 && ink > 0.005 * w * h,
                "chart {} is blank: {ink} inked pixels of {w}×{h}",
                c["id"]
            );
            ensure!(
                w >= c["css"].as_f64().unwrap_or(0.0),
                "chart {} is drawn below its CSS size (blurry on high-DPI)",
                c["id"]
            );
        }
        ctx.shot(&format!("charts-{bundle}-{exp}"))?;
    }
    let drawn_steps = ctx.browser.eval(
        "return document.querySelector('canvas[id$=\"-steps\"]')?.dataset.drawn === '1';",
        json!([]),
    )?;
    ensure!(
        drawn_steps == json!(true),
        "the per-step distribution of the bundle with steps is not drawn"
    );
    // High-DPI: at devicePixelRatio 2 the backing store is twice the CSS size.
    ctx.browser.cdp(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1280, "height": 2400, "deviceScaleFactor": 2, "mobile": false}),
    )?;
    let sizes = (|| {
        ctx.browser.goto("about:blank")?;
        ctx.open_experiment(&ctx.published_id, "batch_sweep")?;
        ctx.browser.eval(
            "return [...document.querySelectorAll('canvas.chart-canvas')].map(c=>[devicePixelRatio, c.width, c.clientWidth]);",
            json!([]),
        )
    })();
    ctx.browser
        .cdp("Emulation.clearDeviceMetricsOverride", json!({}))?;
    let sizes: Vec<(f64, f64, f64)> = serde_json::from_value(sizes?)?;
    ensure!(!sizes.is_empty(), "no chart at devicePixelRatio 2");
    for (dpr, w, css) in sizes {
        ensure!(
            dpr == 2.0 && (w - 2.0 * css).abs() <= 1.0,
            "at devicePixelRatio {dpr} a chart {css} CSS pixels wide has a {w}-pixel backing store (expected {})",
            2.0 * css
        );
    }
    Ok(())
}

pub(super) fn explanation_present(ctx: &Ctx) -> Result<()> {
    ctx.open_experiment(&ctx.measured_id, "batch_sweep")?;
    let glossary = ctx.text(".glossary")?;
    let want = stallscope_bundle::analysis::Metric::SamplesPerS.explanation();
    ensure!(
        glossary.contains(want),
        "the glossary lacks the explanation of samples/s"
    );
    let label = ctx.text(".diagnostic-charts .mode-label")?;
    ensure!(
        label == "diagnostic — synchronized at every stage",
        "the stage chart is labelled {label:?}"
    );
    let help = ctx.browser.eval(
        "return [...document.querySelectorAll('.comparison-table th[data-col]')].every(t=>t.title.length>20);",
        json!([]),
    )?;
    ensure!(
        help == json!(true),
        "every column heading should carry its explanation"
    );
    ctx.shot("experiment-measured")?;
    ctx.open(&format!("#/how/{}", ctx.measured_id))?;
    let barrier = ctx.text(".own-numbers.barrier")?;
    ensure!(
        barrier.contains("the barriers added") && barrier.contains(" ms per step"),
        "\"How to read this\" should give the barrier overhead from the measured bundle: {barrier:?}"
    );
    Ok(())
}

pub(super) fn permalink_restores_view(ctx: &Ctx) -> Result<()> {
    ctx.open_experiment(&ctx.published_id, "batch_sweep")?;
    let epoch_col = ctx.column("epoch (whole-run")?;
    ctx.browser.eval(
        "document.querySelector(`.comparison-table th[data-col='${arguments[0]}']`).click();",
        json!([epoch_col]),
    )?;
    ctx.browser
        .wait_for("the sorted table", EXPERIMENT_READY, WAIT)?;
    ctx.browser.eval(
        "const s=document.querySelector('#baseline'); s.value='bs256'; s.dispatchEvent(new Event('change'));",
        json!([]),
    )?;
    ctx.browser.wait_for(
        "the new baseline",
        "return document.querySelector('tr.baseline')?.dataset.config === 'bs256';",
        WAIT,
    )?;
    let state = "return {href: location.href, first: document.querySelector('.comparison-table tbody tr').dataset.config, base: document.querySelector('tr.baseline')?.dataset.config};";
    let before = ctx.browser.eval(state, json!([]))?;
    let href = before["href"].as_str().context("no href")?.to_string();
    ensure!(
        before["first"] == json!("bs2048"),
        "sorting by epoch time should put bs2048 (1.607 s) first, found {}",
        before["first"]
    );
    ctx.browser.goto("about:blank")?;
    ctx.browser.goto(&href)?;
    ctx.browser
        .wait_for("the reopened page", EXPERIMENT_READY, WAIT)?;
    let after = ctx.browser.eval(state, json!([]))?;
    ensure!(
        after == before,
        "the link {href} reopened a different view: {after} instead of {before}"
    );
    Ok(())
}

pub(super) fn exports_table_and_chart(ctx: &Ctx) -> Result<()> {
    let downloads = tempfile::Builder::new()
        .prefix("stallscope-downloads-")
        .tempdir()?;
    ctx.browser.cdp(
        "Browser.setDownloadBehavior",
        json!({"behavior": "allow", "downloadPath": downloads.path().display().to_string()}),
    )?;
    ctx.open_experiment(&ctx.published_id, "batch_sweep")?;
    ctx.browser.eval(
        "document.querySelector('.export-csv').click(); document.querySelector('.export-md').click(); document.querySelector('figure.chart .export-png').click();",
        json!([]),
    )?;
    let stem = format!("{}-batch_sweep", ctx.published_id);
    let want = [
        format!("{stem}.csv"),
        format!("{stem}.md"),
        format!("{stem}-throughput.png"),
    ];
    let deadline = std::time::Instant::now() + WAIT;
    while !want.iter().all(|f| downloads.path().join(f).is_file()) {
        if std::time::Instant::now() > deadline {
            let found: Vec<String> = std::fs::read_dir(downloads.path())?
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            bail!("expected downloads {want:?}, found {found:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let csv = std::fs::read_to_string(downloads.path().join(&want[0]))?;
    ensure!(
        csv.lines().any(|l| l.starts_with("batch 32,32,16062,")),
        "the CSV lacks the row of batch 32 with 16062 samples/s: {:?}",
        csv.lines().take(3).collect::<Vec<_>>()
    );
    let md = std::fs::read_to_string(downloads.path().join(&want[1]))?;
    ensure!(
        md.contains("Published figures") && md.contains("| batch 2,048 |") && md.contains("**"),
        "the Markdown lacks the provenance, a row or the best mark: {:?}",
        md.lines().take(6).collect::<Vec<_>>()
    );
    let png = std::fs::read(downloads.path().join(&want[2]))?;
    ensure!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "the chart export is not a PNG of a drawn chart ({} bytes)",
        png.len()
    );
    Ok(())
}

pub(super) fn oom_failure_explained(ctx: &Ctx) -> Result<()> {
    ctx.open(&format!("#/b/{}/e/oom_probe", ctx.published_id))?;
    ctx.browser.wait_for(
        "the OOM page",
        "return !!document.querySelector('.comparison-table');",
        WAIT,
    )?;
    let card = ctx.text(".failure-card")?;
    ensure!(
        card.contains("batch 24,576") && card.contains("588.0 MiB"),
        "the failed configuration is not described: {card:?}"
    );
    let check = ctx.text(".failure-card .plausibility")?;
    ensure!(
        check.contains("do not fit") && check.contains("17179869184.00 GiB"),
        "the impossible quantity of the published error is not flagged: {check:?}"
    );
    ctx.shot("oom-published")
}

pub(super) fn stall_attribution_shown(ctx: &Ctx) -> Result<()> {
    ctx.open_experiment(STEPS_ID, "stall")?;
    let verdict = ctx.text(".verdict-box .verdict")?;
    ensure!(
        verdict.starts_with("Input-bound") && verdict.contains("40%"),
        "the verdict should say input-bound, waiting 40%: {verdict:?}"
    );
    let note = ctx.text("figure.chart figcaption")?;
    ensure!(
        note.contains("transfer stall 10.0%") && note.contains("data stall 33%"),
        "the attribution chart should give the two stalls: {note:?}"
    );
    ctx.shot("stall-generated")
}

/// `16062` → `16,062`.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
