//! Browser checks of issue 32, "the review meeting": the viewer read at
//! first glance on a projector. The job page's headline has a direction, a
//! unit and a mode; on every page the viewer links to, no column of any
//! table is out of reach at 1280 px and one byte-unit system (IEC) is used,
//! one time unit per table, no `[s]` on a rate; compare names both sides
//! (title, date, runner commit) and keeps each side's noise flags. The job
//! page's first screen is also the README's picture (`docs/img/`).
use super::ctx::*;
use super::{ranks_job, your_job};
use anyhow::{Context, Result, ensure};
use serde_json::json;
use stallscope_bundle::analysis::{Direction, compare_bundles, job_answer, show_created};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The README's picture of the viewer, written by this stage.
pub(super) const README_SHOT: &str = "docs/img/viewer-job.png";
/// The second run of the measured job (another date and runner commit,
/// one configuration noisy), for the compare check.
pub(super) const SECOND_JOB_ID: &str = "job-tune-second-run";
const SECOND_COMMIT: &str = "0123456789ab";

/// The measured job bundle again, as a second run of the same job: a later
/// date, another runner commit, and one repeat of `num_workers=1` 30%
/// slower (a noisy configuration on this side; the script's own settings
/// are noisy on the first side already).
pub(super) fn write_second_job(repo: &Path, work: &Path) -> Result<PathBuf> {
    let mut b = read_json(&repo.join(your_job::JOB))?;
    b["id"] = json!(SECOND_JOB_ID);
    b["created_at"] = json!("2026-12-24T08:05:00Z");
    b["environment"]["runner"]["commit"] = json!(SECOND_COMMIT);
    let job = b["experiments"]
        .as_array_mut()
        .and_then(|es| es.iter_mut().find(|e| e["id"] == "job"))
        .context("the job fixture has a job experiment")?;
    let run = job["configurations"]
        .as_array_mut()
        .and_then(|cs| {
            cs.iter_mut()
                .find(|c| c["id"] == "num_workers=1-persistent_workers=true")
        })
        .and_then(|c| c["runs"].as_array_mut())
        .and_then(|rs| rs.iter_mut().find(|r| r["timing_mode"] == "whole_run"))
        .context("the job fixture has a whole-run run of num_workers=1")?;
    let w = &mut run["whole_run"];
    for (k, by) in [
        ("seconds", 1.3),
        ("step_s", 1.3),
        ("samples_per_s", 1.0 / 1.3),
    ] {
        let v = w[k].as_f64().with_context(|| format!("whole_run.{k}"))?;
        w[k] = json!(v * by);
    }
    let path = work.join("job-second-run.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&b)?)?;
    Ok(path)
}

pub(super) fn job_headline_has_direction_and_unit(ctx: &Ctx) -> Result<()> {
    let bundle = stallscope_bundle::read_bundle(&std::fs::read(ctx.repo.join(your_job::JOB))?)?;
    let a = job_answer(&bundle).context("the fixture has no job answer")?;
    ctx.open(&format!("#/b/{}", bundle.id))?;
    let headline = ctx.browser.wait_for(
        "the job's headline",
        "const h=document.querySelector('.your-job .job-headline'); return h && [h.textContent, h.dataset.direction];",
        WAIT,
    )?;
    let (text, direction): (String, String) = serde_json::from_value(headline)?;
    let words = [
        "more samples/s",
        "fewer samples/s",
        "No measurable difference in samples/s",
    ];
    ensure!(
        words.iter().any(|w| text.contains(w)),
        "the headline {text:?} has no direction with its unit (one of {words:?})"
    );
    ensure!(
        text.contains('×') || text.starts_with("No measurable"),
        "the headline {text:?} has no ratio"
    );
    ensure!(
        text.contains("whole-run"),
        "the headline {text:?} does not say its timing mode"
    );
    ensure!(
        text == a.headline.text,
        "the headline reads {text:?}, analysis::job_answer {:?}",
        a.headline.text
    );
    let want = match a.headline.direction {
        Some(Direction::More) => "more",
        Some(Direction::Fewer) => "fewer",
        Some(Direction::NoDifference) => "none",
        None => "",
    };
    ensure!(
        direction == want,
        "data-direction {direction:?}, expected {want:?}"
    );
    // Beside it, one line saying what whole-run is; the summed memory.
    let mode = ctx.text(".job-answer .whole-run-line")?;
    ensure!(
        mode.starts_with("Whole-run:"),
        "the mode line reads {mode:?}"
    );
    let memory = ctx.text(".job-memory-sum")?;
    let m = a
        .memory
        .as_ref()
        .context("the fixture has no memory change")?;
    ensure!(
        memory == m.text(),
        "the memory of the change reads {memory:?}"
    );
    readme_shot(ctx)
}

/// The job page's first screen, 1280×860, as the README shows it.
fn readme_shot(ctx: &Ctx) -> Result<()> {
    ctx.browser.cdp(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1280, "height": 860, "deviceScaleFactor": 1, "mobile": false}),
    )?;
    let shot = (|| {
        ctx.browser.eval("window.scrollTo(0, 0);", json!([]))?;
        std::thread::sleep(Duration::from_millis(300));
        ctx.browser.screenshot(&ctx.repo.join(README_SHOT))
    })();
    ctx.browser
        .cdp("Emulation.clearDeviceMetricsOverride", json!({}))?;
    shot
}

/// JS: every drawn chart of the page is drawn (or says why not).
const SETTLED: &str = "return [...document.querySelectorAll('canvas.chart-canvas')].every(c => c.dataset.drawn==='1' || (c.closest('figure') && c.closest('figure').querySelector('.warning')));";

/// Every page the viewer links to from the library (each bundle, each of
/// its experiments, its how-to-read), and the compare pages the checks
/// open.
fn pages(ctx: &Ctx) -> Result<Vec<String>> {
    ctx.open("#/")?;
    let links = |css: &str| -> Result<Vec<String>> {
        let v = ctx.browser.eval(
            "return [...document.querySelectorAll(arguments[0])].map(a=>a.getAttribute('href'));",
            json!([css]),
        )?;
        Ok(serde_json::from_value(v)?)
    };
    let mut out = vec!["#/".to_string()];
    for b in links(".bundle-link")? {
        ctx.open(&b)?;
        out.push(b.clone());
        out.extend(links(".experiment-link")?);
        out.push(b.replacen("#/b/", "#/how/", 1));
    }
    let (job, second) = (read_json(&ctx.repo.join(your_job::JOB))?, SECOND_JOB_ID);
    out.extend([
        format!("#/compare/{}/{}", ctx.published_id, ctx.measured_id),
        format!(
            "#/compare/{}/{second}",
            job["id"].as_str().unwrap_or_default()
        ),
        format!(
            "#/compare/{}/{}",
            ranks_job::SINGLE_ID,
            crate::web::rank_bundles::merged_id(ranks_job::JOB_ID)
        ),
    ]);
    Ok(out)
}

/// Open `page` and let its charts settle.
fn visit(ctx: &Ctx, page: &str) -> Result<()> {
    ctx.open(page)?;
    ctx.browser
        .wait_for(&format!("the charts of {page}"), SETTLED, WAIT)?;
    Ok(())
}

/// JS: what is out of reach on this page at this width — the page itself
/// scrolling sideways, a table's column past the window with no scroll box,
/// a scroll box that does not bring the last column in, a first column
/// that scrolls away.
const REACH: &str = r#"
const vw = document.documentElement.clientWidth, out = [];
if (document.documentElement.scrollWidth > vw + 1)
  out.push(`the page scrolls sideways (${document.documentElement.scrollWidth} px in ${vw})`);
const scroller = el => { for (let p = el.parentElement; p; p = p.parentElement) {
  const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll') return p; } return null; };
for (const t of document.querySelectorAll('table')) {
  if (!t.getClientRects().length || !t.rows.length) continue;
  const name = 'table.' + (t.className || '(no class)');
  const head = t.tHead ? t.tHead.rows[t.tHead.rows.length - 1] : t.rows[0];
  const cells = [...head.cells];
  const s = scroller(t);
  const box = s ? s.getBoundingClientRect() : { left: 0, right: vw };
  if (box.left < -1 || box.right > vw + 1) { out.push(`${name}: its scroll box runs past the window`); continue; }
  if (s && s.scrollWidth > s.clientWidth + 1) {
    const first = t.rows[t.rows.length - 1].cells[0];
    s.scrollLeft = s.scrollWidth;
    const last = cells[cells.length - 1].getBoundingClientRect(), f = first.getBoundingClientRect();
    if (last.right > box.right + 1) out.push(`${name}: scrolled to the end, its last column is still cut`);
    if (f.left < box.left - 1) out.push(`${name}: scrolled sideways, its first column goes out of view`);
    s.scrollLeft = 0;
  } else {
    for (const c of cells) {
      const r = c.getBoundingClientRect();
      if (r.right > box.right + 1) out.push(`${name}: column “${c.textContent.trim().slice(0, 40)}” ends at ${Math.round(r.right)} px, past ${Math.round(box.right)}, with no scroll`);
    }
  }
}
return out;"#;

pub(super) fn every_column_within_reach_at_1280(ctx: &Ctx) -> Result<()> {
    let width = ctx.browser.eval("return window.innerWidth;", json!([]))?;
    ensure!(
        width == json!(1280),
        "the window is {width} px wide, not 1280"
    );
    let mut problems = Vec::new();
    let pages = pages(ctx)?;
    for page in &pages {
        visit(ctx, page)?;
        let found: Vec<String> = serde_json::from_value(ctx.browser.eval(REACH, json!([]))?)?;
        problems.extend(found.into_iter().map(|p| format!("{page}: {p}")));
    }
    ensure!(
        problems.is_empty(),
        "{} problem(s) over {} pages:\n  {}",
        problems.len(),
        pages.len(),
        problems.join("\n  ")
    );
    Ok(())
}

/// JS: the page's unit problems. Text a bundle brings as written (a
/// description, a citation, conditions, notes, a suite, a command) is left
/// out: the viewer quotes it, it does not format it.
const UNITS: &str = r#"
const quoted = 'cite, .description, .conditions, pre, code, .notes, .suite, .job-command, .failure, .failure-card, script, style';
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
let text = '';
for (let n = walker.nextNode(); n; n = walker.nextNode())
  if (!n.parentElement.closest(quoted)) text += n.textContent + ' ';
const out = [];
const decimal = /\b\d[\d,.]*\s?(kB|KB|MB|GB|TB)(\/s)?\b|\b(MB|GB)\/s\b/g;
for (const m of text.matchAll(decimal)) out.push(`a decimal byte unit: “${m[0]}”`);
const rateWithTime = s => /\/s\b/.test(s) && /\[\/?s\]/.test(s);
for (const h of document.querySelectorAll('th'))
  if (rateWithTime(h.textContent)) out.push(`a rate heading with a time unit: “${h.textContent.trim()}”`);
for (const c of document.querySelectorAll('canvas[data-axes]'))
  for (const axis of c.dataset.axes.split(' | ')) {
    if (rateWithTime(axis)) out.push(`chart ${c.id}: a rate axis with [s]: “${axis}”`);
    const d = axis.match(/\b\d[\d,.]*\s?(kB|MB|GB)\b|\[(kB|MB|GB)(\/s)?\]/);
    if (d) out.push(`chart ${c.id}: a decimal byte unit on an axis: “${axis}”`);
  }
for (const t of document.querySelectorAll('table')) {
  if (!t.getClientRects().length) continue;
  const units = new Set();
  for (const c of t.querySelectorAll('th, td')) {
    const s = c.textContent.trim();
    const head = s.match(/\[(s|ms|µs)\]/);
    if (head) units.add(head[1]);
    const value = s.match(/^[★\s]*[−-]?\d[\d,.]*\s(s|ms|µs)\b/);
    if (value) units.add(value[1]);
  }
  if (units.size > 1) out.push(`table.${t.className}: time in ${[...units].join(' and ')}`);
}
return out;"#;

pub(super) fn units_agree_on_every_page(ctx: &Ctx) -> Result<()> {
    let mut problems = Vec::new();
    let pages = pages(ctx)?;
    for page in &pages {
        visit(ctx, page)?;
        let found: Vec<String> = serde_json::from_value(ctx.browser.eval(UNITS, json!([]))?)?;
        problems.extend(found.into_iter().map(|p| format!("{page}: {p}")));
    }
    problems.dedup();
    ensure!(
        problems.is_empty(),
        "{} problem(s) over {} pages:\n  {}",
        problems.len(),
        pages.len(),
        problems.join("\n  ")
    );
    Ok(())
}

pub(super) fn compare_tells_the_sides_apart(ctx: &Ctx) -> Result<()> {
    let base = stallscope_bundle::read_bundle(&std::fs::read(ctx.repo.join(your_job::JOB))?)?;
    let cmp = {
        let dir = tempfile::tempdir()?;
        let path = write_second_job(&ctx.repo, dir.path())?;
        let new = stallscope_bundle::read_bundle(&std::fs::read(path)?)?;
        compare_bundles(&base, &new, 5.0)
    };
    ctx.open(&format!("#/compare/{}/{SECOND_JOB_ID}?e=job", base.id))?;
    ctx.browser.wait_for(
        "the two sides",
        "return !!document.querySelector('.compare-sides') && document.querySelectorAll('.compare-table tr[data-config]').length > 0;",
        WAIT,
    )?;
    let side = |field: &str| -> Result<(String, String)> {
        Ok((
            ctx.text(&format!(
                ".compare-sides tr[data-field='{field}'] .side-base"
            ))?,
            ctx.text(&format!(
                ".compare-sides tr[data-field='{field}'] .side-new"
            ))?,
        ))
    };
    let s = &cmp.sides;
    for (field, want) in [
        ("title", (s.base.title.clone(), s.new.title.clone())),
        (
            "created",
            (
                show_created(&base.created_at),
                show_created("2026-12-24T08:05:00Z"),
            ),
        ),
        (
            "runner commit",
            (
                s.base.commit.clone().unwrap_or_default(),
                SECOND_COMMIT.to_string(),
            ),
        ),
    ] {
        let got = side(field)?;
        ensure!(
            got == want,
            "{field}: the page shows {got:?}, the bundles {want:?}"
        );
    }
    ensure!(
        s.base.title.starts_with("Job: train_slow_dataset.py"),
        "the job is titled {:?}, not by its script",
        s.base.title
    );
    let flagged = ctx.browser.eval(
        "return !!document.querySelector(\".compare-sides tr[data-field='runner commit'].flagged\");",
        json!([]),
    )?;
    ensure!(
        flagged == json!(true),
        "the different runner commit is not flagged"
    );
    let flag = ctx.text(".compare-flag")?;
    ensure!(
        flag.starts_with("Different runner commits"),
        "the flag reads {flag:?}"
    );
    noise_kept(ctx, &cmp)?;
    ctx.shot("compare-two-runs")
}

/// Each side's noise flag, on the side it belongs to and nowhere else.
fn noise_kept(ctx: &Ctx, cmp: &stallscope_bundle::analysis::BundleComparison) -> Result<()> {
    let e = cmp
        .experiments
        .iter()
        .find(|e| e.experiment_id == "job")
        .context("no job experiment compared")?;
    let mut noisy = 0;
    for r in &e.rows {
        for (class, s) in [("side-base", &r.base), ("side-new", &r.new)] {
            let cell = ctx.text(&format!(
                ".compare-table tr[data-config='{}'] td.{class}",
                r.config_id
            ))?;
            let want = s
                .filter(|s| s.noisy)
                .map(|s| format!("(! {:.0}%)", s.spread * 100.0));
            match &want {
                Some(flag) => ensure!(
                    cell.contains(flag.as_str()),
                    "{} {class}: the noise flag {flag} is dropped: {cell:?}",
                    r.config_id
                ),
                None => ensure!(
                    !cell.contains("(!"),
                    "{} {class}: a noise flag on a quiet side: {cell:?}",
                    r.config_id
                ),
            }
            noisy += usize::from(want.is_some());
        }
    }
    let sides_noisy =
        |f: fn(&stallscope_bundle::analysis::CompareRow) -> bool| e.rows.iter().any(f);
    ensure!(
        sides_noisy(|r| r.base.is_some_and(|s| s.noisy))
            && sides_noisy(|r| r.new.is_some_and(|s| s.noisy)),
        "the pair should have a noisy configuration on each side ({noisy} noisy cells)"
    );
    Ok(())
}
