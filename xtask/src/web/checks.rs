//! The browser tests: a site exported by the real `stallscope site` from the
//! published FashionMNIST bundle, a measured one and a bundle whose title is
//! HTML, served by `stallscope serve`, checked in headless Chromium. Each
//! check is named, prints its own failure, and screenshots go to
//! `target/screenshots/`.
use super::{Server, export_site};
use crate::browser::{Browser, TempDir};
use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const PUBLISHED: &str = "fixtures/published/fashionmnist-batch-sweep.json";
const MEASURED: &str = "fixtures/measured/example-before.json";
const XSS_TITLE: &str = "<img src=x onerror=alert(1)>";
const XSS_ID: &str = "xss-title-test";
const STEPS_ID: &str = "generated-steps-test";
const SITE_BUNDLES: usize = 4;
const WAIT: Duration = Duration::from_secs(20);

/// One browser test.
type Check = fn(&Ctx) -> Result<()>;

/// Everything a check needs.
struct Ctx {
    browser: Browser,
    url: String,
    published: Value,
    published_id: String,
    measured_id: String,
    shots: PathBuf,
    repo: PathBuf,
}

/// JS: the page finished loading its bundles.
const LOADED: &str = "return !document.querySelector('.pending') && document.querySelectorAll('.bundle-row, .bundle-title, .experiment-title, .compare-view, .how-to-read').length > 0;";
/// JS: the experiment page's table is there and every chart is drawn.
const EXPERIMENT_READY: &str = "const c=[...document.querySelectorAll('canvas.chart-canvas')]; return !!document.querySelector('.comparison-table') && c.length>0 && c.every(x=>x.dataset.drawn==='1');";

pub(super) fn run(repo: &Path, runner: &Path) -> Result<()> {
    let work = TempDir::new("stallscope-browser-tests")?;
    let xss = work.0.join("xss-title.json");
    let mut b: Value = read_json(&repo.join("fixtures/measured/example-after.json"))?;
    b["title"] = json!(XSS_TITLE);
    b["id"] = json!(XSS_ID);
    std::fs::write(&xss, serde_json::to_vec_pretty(&b)?)?;
    let steps = work.0.join("steps.json");
    let mut generated = super::bench_viewer::generated_bundle(10_000, STEPS_ID);
    generated.experiments.push(generated_stall_experiment());
    std::fs::write(&steps, serde_json::to_vec(&generated)?)?;
    let site = work.0.join("site");
    export_site(
        runner,
        &[repo.join(PUBLISHED), repo.join(MEASURED), xss, steps],
        &site,
    )?;
    std::fs::create_dir_all(site.join("extra"))?;
    std::fs::copy(
        repo.join("fixtures/bad/truncated.json"),
        site.join("extra/truncated.json"),
    )?;
    // One byte over the limit: refused before it is parsed.
    std::fs::write(
        site.join("extra/huge.json"),
        vec![b' '; stallscope_bundle::MAX_BUNDLE_BYTES + 1],
    )?;
    let shots = repo.join("target/screenshots");
    if shots.exists() {
        std::fs::remove_dir_all(&shots)
            .with_context(|| format!("cannot clear {}", shots.display()))?;
    }
    // Served from the folder above, so the site lives under a sub-path.
    let server = Server::start(runner, &work.0)?;
    let published = read_json(&repo.join(PUBLISHED))?;
    let ctx = Ctx {
        browser: Browser::start(1280, 2400)?,
        url: format!("{}site", server.url),
        published_id: published["id"]
            .as_str()
            .context("published bundle has no id")?
            .to_string(),
        measured_id: read_json(&repo.join(MEASURED))?["id"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        published,
        shots,
        repo: repo.to_path_buf(),
    };
    let checks: [(&str, Check); 14] = [
        ("site_lists_its_bundles", site_lists_its_bundles),
        (
            "table_cells_equal_the_fixture",
            table_cells_equal_the_fixture,
        ),
        ("sweet_spot_shown", sweet_spot_shown),
        ("charts_drawn", charts_drawn),
        ("explanation_present", explanation_present),
        ("permalink_restores_view", permalink_restores_view),
        (
            "malformed_bundle_shows_message_good_one_stays",
            malformed_bundle_shows_message,
        ),
        ("too_large_bundle_refused", too_large_bundle_refused),
        ("html_title_shown_as_text", html_title_shown_as_text),
        ("dropped_file_is_loaded", dropped_file_is_loaded),
        ("exports_table_and_chart", exports_table_and_chart),
        ("oom_failure_explained", oom_failure_explained),
        ("stall_attribution_shown", stall_attribution_shown),
        (
            "compare_view_lists_differences",
            compare_view_lists_differences,
        ),
    ];
    let (mut passed, mut failed) = (0, 0);
    for (name, check) in checks {
        match check(&ctx) {
            Ok(()) => {
                passed += 1;
                println!("browser test {name} ... ok");
            }
            Err(e) => {
                failed += 1;
                println!("browser test {name} ... FAILED: {e:#}");
                let _ = ctx
                    .browser
                    .screenshot(&ctx.shots.join(format!("failed-{name}.png")));
            }
        }
    }
    println!(
        "browser tests: {passed} passed, {failed} failed (screenshots in {})",
        ctx.shots.display()
    );
    drop(server);
    if failed > 0 {
        bail!("{failed} browser test(s) failed");
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("{} is not JSON", path.display()))
}

impl Ctx {
    fn open(&self, hash: &str) -> Result<()> {
        self.browser.goto(&format!("{}{hash}", self.url))?;
        self.browser.wait_for("the bundles to load", LOADED, WAIT)?;
        Ok(())
    }

    fn open_experiment(&self, bundle: &str, experiment: &str) -> Result<()> {
        self.open(&format!("#/b/{bundle}/e/{experiment}"))?;
        self.browser
            .wait_for("the experiment page to render", EXPERIMENT_READY, WAIT)?;
        Ok(())
    }

    fn text(&self, css: &str) -> Result<String> {
        let v = self.browser.eval(
            "const e=document.querySelector(arguments[0]); return e ? e.textContent : null;",
            json!([css]),
        )?;
        v.as_str()
            .map(str::to_string)
            .with_context(|| format!("no element matches {css}"))
    }

    fn shot(&self, name: &str) -> Result<()> {
        self.browser
            .screenshot(&self.shots.join(format!("{name}.png")))
    }

    /// The `data-col` of the table column whose heading starts with `prefix`.
    fn column(&self, prefix: &str) -> Result<String> {
        let v = self.browser.eval(
            "const h=[...document.querySelectorAll('.comparison-table th[data-col]')].find(t=>t.textContent.startsWith(arguments[0])); return h ? h.dataset.col : null;",
            json!([prefix]),
        )?;
        v.as_str()
            .map(str::to_string)
            .with_context(|| format!("no column heading starts with {prefix:?}"))
    }
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

fn site_lists_its_bundles(ctx: &Ctx) -> Result<()> {
    ctx.open("#/")?;
    let titles = ctx.browser.eval(
        "return [...document.querySelectorAll('.bundle-link')].map(a=>a.textContent);",
        json!([]),
    )?;
    let titles: Vec<String> = serde_json::from_value(titles)?;
    let want = ctx.published["title"].as_str().unwrap_or_default();
    ensure!(
        titles.len() == SITE_BUNDLES,
        "expected the site's {SITE_BUNDLES} bundles listed, found {titles:?}"
    );
    ensure!(
        titles.iter().any(|t| t == want),
        "the published bundle {want:?} is not listed: {titles:?}"
    );
    ctx.shot("library")?;
    ctx.open(&format!("#/b/{}", ctx.published_id))?;
    let badge = ctx.text(".bundle-page .badge")?;
    ensure!(
        badge == "published",
        "the published bundle's page shows the badge {badge:?}, expected \"published\""
    );
    ctx.shot("bundle-published")
}

fn table_cells_equal_the_fixture(ctx: &Ctx) -> Result<()> {
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
        let want_epoch = format!("{seconds:.3} s");
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

fn sweet_spot_shown(ctx: &Ctx) -> Result<()> {
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

fn charts_drawn(ctx: &Ctx) -> Result<()> {
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

fn explanation_present(ctx: &Ctx) -> Result<()> {
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

fn permalink_restores_view(ctx: &Ctx) -> Result<()> {
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

fn malformed_bundle_shows_message(ctx: &Ctx) -> Result<()> {
    ctx.browser
        .goto(&format!("{}?bundle=extra/truncated.json#/", ctx.url))?;
    ctx.browser.wait_for("the load error", "return !document.querySelector('.pending') && document.querySelectorAll('.load-error').length === 1;", WAIT)?;
    let source = ctx.text(".load-error-source")?;
    let message = ctx.text(".load-error-message")?;
    ensure!(
        source == "extra/truncated.json",
        "the error names {source:?}, not the file"
    );
    ensure!(
        message.contains("line") && message.contains("truncated"),
        "the message does not say where and what: {message:?}"
    );
    let rows = ctx.browser.eval(
        "return document.querySelectorAll('.bundle-row').length;",
        json!([]),
    )?;
    ensure!(
        rows == json!(SITE_BUNDLES),
        "the site's {SITE_BUNDLES} bundles should stay loaded, found {rows}"
    );
    // The file picker path, with a bundle of a newer major format.
    let newer = ctx.repo.join("fixtures/bad/newer-major.json");
    ctx.browser.pick_file("#file-picker", &newer)?;
    ctx.browser.wait_for(
        "the second load error",
        "return document.querySelectorAll('.load-error').length === 2;",
        WAIT,
    )?;
    let v = ctx.browser.eval(
        "return [...document.querySelectorAll('.load-error')].map(e=>e.textContent);",
        json!([]),
    )?;
    let texts: Vec<String> = serde_json::from_value(v)?;
    ensure!(
        texts
            .iter()
            .any(|t| t.contains("newer-major.json") && t.contains("newer")),
        "the picked newer-major bundle should say it is newer: {texts:?}"
    );
    let rows = ctx.browser.eval(
        "return document.querySelectorAll('.bundle-row').length;",
        json!([]),
    )?;
    ensure!(
        rows == json!(SITE_BUNDLES),
        "the loaded bundles changed after a bad file: {rows}"
    );
    ctx.shot("load-errors")
}

fn html_title_shown_as_text(ctx: &Ctx) -> Result<()> {
    ctx.open(&format!("#/b/{XSS_ID}"))?;
    let title = ctx.text(".bundle-title")?;
    ensure!(
        title == XSS_TITLE,
        "the title shows {title:?}, expected the literal text {XSS_TITLE:?}"
    );
    let imgs = ctx
        .browser
        .eval("return document.querySelectorAll('img').length;", json!([]))?;
    ensure!(
        imgs == json!(0),
        "the page has {imgs} <img> elements: bundle text became HTML"
    );
    std::thread::sleep(Duration::from_millis(300));
    if let Some(text) = ctx.browser.alert_text() {
        bail!("an alert opened ({text:?}): bundle text ran as script");
    }
    ctx.shot("html-title")
}

fn compare_view_lists_differences(ctx: &Ctx) -> Result<()> {
    ctx.open(&format!(
        "#/compare/{}/{}",
        ctx.published_id, ctx.measured_id
    ))?;
    ctx.browser.wait_for(
        "the comparison",
        "return document.querySelectorAll('.compare-experiment').length > 0;",
        WAIT,
    )?;
    let warning = ctx.text(".differences-warning")?;
    ensure!(
        warning.contains("differ") && warning.contains("device"),
        "the machine differences are not listed: {warning:?}"
    );
    ctx.shot("compare")?;
    ctx.open(&format!(
        "#/compare/{}/{}?e=batch_sweep",
        ctx.published_id, ctx.measured_id
    ))?;
    let n = ctx.browser.wait_for(
        "the filtered comparison",
        "return document.querySelectorAll('.compare-experiment').length;",
        WAIT,
    )?;
    ensure!(
        n == json!(1),
        "a link to one experiment's comparison shows {n} experiments"
    );
    Ok(())
}

fn dropped_file_is_loaded(ctx: &Ctx) -> Result<()> {
    let path = ctx.repo.join("fixtures/measured/example-after.json");
    let text = std::fs::read_to_string(&path)?;
    let title = read_json(&path)?["title"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    ctx.open("#/")?;
    // A real DragEvent with the file in its DataTransfer, as a person's drop.
    ctx.browser.eval(
        "const dt=new DataTransfer(); dt.items.add(new File([arguments[0]], 'example-after.json', {type:'application/json'})); document.querySelector('.drop-zone').dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));",
        json!([text]),
    )?;
    let titles = ctx.browser.wait_for(
        "the dropped bundle in the library",
        &format!("const t=[...document.querySelectorAll('.bundle-link')].map(a=>a.textContent); return t.length > {SITE_BUNDLES} && t;"),
        WAIT,
    )?;
    let titles: Vec<String> = serde_json::from_value(titles)?;
    ensure!(
        titles.len() == SITE_BUNDLES + 1 && titles.contains(&title),
        "after dropping example-after.json the library lists {titles:?}"
    );
    Ok(())
}

fn exports_table_and_chart(ctx: &Ctx) -> Result<()> {
    let downloads = TempDir::new("stallscope-downloads")?;
    ctx.browser.cdp(
        "Browser.setDownloadBehavior",
        json!({"behavior": "allow", "downloadPath": downloads.0.display().to_string()}),
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
    while !want.iter().all(|f| downloads.0.join(f).is_file()) {
        if std::time::Instant::now() > deadline {
            let found: Vec<String> = std::fs::read_dir(&downloads.0)?
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            bail!("expected downloads {want:?}, found {found:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let csv = std::fs::read_to_string(downloads.0.join(&want[0]))?;
    ensure!(
        csv.lines().any(|l| l.starts_with("batch 32,32,16062,")),
        "the CSV lacks the row of batch 32 with 16062 samples/s: {:?}",
        csv.lines().take(3).collect::<Vec<_>>()
    );
    let md = std::fs::read_to_string(downloads.0.join(&want[1]))?;
    ensure!(
        md.contains("Published figures") && md.contains("| batch 2,048 |") && md.contains("**"),
        "the Markdown lacks the provenance, a row or the best mark: {:?}",
        md.lines().take(6).collect::<Vec<_>>()
    );
    let png = std::fs::read(downloads.0.join(&want[2]))?;
    ensure!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "the chart export is not a PNG of a drawn chart ({} bytes)",
        png.len()
    );
    Ok(())
}

fn oom_failure_explained(ctx: &Ctx) -> Result<()> {
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

fn too_large_bundle_refused(ctx: &Ctx) -> Result<()> {
    ctx.browser
        .goto(&format!("{}?bundle=extra/huge.json#/", ctx.url))?;
    ctx.browser.wait_for(
        "the size error",
        "return !document.querySelector('.pending') && document.querySelectorAll('.load-error').length === 1;",
        WAIT,
    )?;
    let source = ctx.text(".load-error-source")?;
    let message = ctx.text(".load-error-message")?;
    ensure!(
        source == "extra/huge.json" && message.contains("a bundle may be at most"),
        "a bundle over the limit should be refused with its size: {source:?}: {message:?}"
    );
    let rows = ctx.browser.eval(
        "return document.querySelectorAll('.bundle-row').length;",
        json!([]),
    )?;
    ensure!(
        rows == json!(SITE_BUNDLES),
        "the site's bundles should stay loaded, found {rows}"
    );
    Ok(())
}

/// A stall experiment with generated whole-run rates 1000 / 900 / 600
/// samples/s: transfer stall 10%, data stall 33%, waiting 40% (input-bound).
fn generated_stall_experiment() -> stallscope_bundle::Experiment {
    use stallscope_bundle::*;
    let config = |source: &str, rate: f64| {
        let samples = 6_000u64;
        let seconds = samples as f64 / rate;
        let mut params = std::collections::BTreeMap::new();
        params.insert("source".to_string(), ParamValue::Text(source.into()));
        Configuration {
            id: source.into(),
            label: source.replace('_', " "),
            params,
            batch_bytes: None,
            runs: vec![Run {
                id: "r0-e0-whole_run".into(),
                timing_mode: TimingMode::WholeRun,
                repeat: 0,
                epoch: 0,
                phase: Phase::Cold,
                summary_of: None,
                whole_run: Some(WholeRun {
                    seconds: Some(seconds),
                    samples: Some(samples),
                    samples_per_s: Some(samples as f64 / seconds),
                    steps: Some(100),
                    ..Default::default()
                }),
                diagnostic: None,
                memory: None,
                loader: None,
                steps: None,
            }],
            failure: None,
        }
    };
    Experiment {
        id: "stall".into(),
        kind: ExperimentKind::Stall,
        title: "Generated stall attribution".into(),
        description: Some("Generated rates for the browser tests; not a measurement.".into()),
        swept: vec!["source".into()],
        settings: Default::default(),
        baseline: None,
        not_applicable: None,
        configurations: vec![
            config("compute_only", 1000.0),
            config("from_host", 900.0),
            config("full_pipeline", 600.0),
        ],
    }
}

fn stall_attribution_shown(ctx: &Ctx) -> Result<()> {
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
