//! Browser check of format 1.1's forward compatibility: a bundle of a newer
//! minor (fixtures/newer-minor/unknown-kind.json, loaded with `?bundle=`) is
//! shown, its unknown experiment kind as a plain table with a note that it is
//! from a newer format, and a knob that does not apply as "—" with its reason.
use super::ctx::*;
use anyhow::{Result, bail, ensure};
use serde_json::json;

/// Where `run` copies the fixture inside the site.
pub(super) const NEWER_MINOR_SITE_PATH: &str = "extra/newer-minor.json";
pub(super) const NEWER_MINOR_FIXTURE: &str = "fixtures/newer-minor/unknown-kind.json";
const BUNDLE_ID: &str = "generated-newer-minor";

/// JS: the text of the first element matching `css` if it is visible (laid
/// out with a size), else null.
const VISIBLE_TEXT: &str = "const e=document.querySelector(arguments[0]); if(!e) return null; const r=e.getBoundingClientRect(); return (r.width>0 && r.height>0 && getComputedStyle(e).visibility!=='hidden') ? e.textContent : null;";

pub(super) fn unknown_kind_shown_with_newer_format_note(ctx: &Ctx) -> Result<()> {
    ctx.browser.goto(&format!(
        "{}?bundle={NEWER_MINOR_SITE_PATH}#/b/{BUNDLE_ID}/e/tokenizer",
        ctx.url
    ))?;
    if let Err(e) = ctx.browser.wait_for(
        "the newer-minor bundle's page",
        "return !document.querySelector('.pending') && !!document.querySelector('.experiment-title, .load-error');",
        WAIT,
    ) {
        let page = ctx.browser.eval(
            "return [location.href, document.querySelector('main') ? document.querySelector('main').innerText.slice(0, 400) : null];",
            json!([]),
        )?;
        bail!("{e:#}; the page is {page}");
    }
    let errors = ctx.browser.eval(
        "return [...document.querySelectorAll('.load-error')].map(e=>e.textContent);",
        json!([]),
    )?;
    ensure!(
        errors == json!([]),
        "the newer-minor bundle should load, got load errors {errors}"
    );
    ctx.browser
        .wait_for("the experiment page to render", EXPERIMENT_READY, WAIT)?;
    let note = ctx
        .browser
        .eval(VISIBLE_TEXT, json!([".verdict-box.newer-format .verdict"]))?;
    let want =
        "experiment kind \"tokenizer\" is from a newer format (1.99); shown as a plain table";
    ensure!(
        note == json!(want),
        "the unknown kind's note should be visible as {want:?}, found {note}"
    );
    let title = ctx
        .browser
        .eval(VISIBLE_TEXT, json!([".experiment-title"]))?;
    ensure!(
        title == json!("Generated tokenizer throughput"),
        "the unknown-kind experiment's title is not shown: {title}"
    );
    let rate_col = ctx.column("samples/s (whole-run")?;
    let t4 = ctx.text(&format!(
        "td[data-config='t4'][data-col='{rate_col}'] .value"
    ))?;
    // The median of the two steady whole-run runs, 6,000 ÷ 2.0 s and
    // 6,000 ÷ 2.02 s; the "sampled" run (2.5 s) is in no figure.
    ensure!(
        t4 == "2,985/s",
        "t4's whole-run rate should be 2,985/s, found {t4:?}"
    );
    let footnote = ctx.text(".table-footnote")?;
    ensure!(
        footnote.contains("timing mode \"sampled\"") && footnote.contains("in no figure"),
        "the runs of the unknown timing mode should be said to be left out: {footnote:?}"
    );
    let failure = ctx.text(".failure-card h3")?;
    ensure!(
        failure.contains("cosmic_ray") && failure.contains("a bit flipped"),
        "the unknown failure kind should be shown with its message: {failure:?}"
    );
    ctx.shot("newer-minor-unknown-kind")?;

    // The known kind beside it, with a knob that does not apply (the page
    // reloads, so the bundle is named again).
    ctx.browser.goto(&format!(
        "{}?bundle={NEWER_MINOR_SITE_PATH}#/b/{BUNDLE_ID}/e/loader",
        ctx.url
    ))?;
    ctx.browser
        .wait_for("the loader experiment page", EXPERIMENT_READY, WAIT)?;
    let cell = ctx.browser.eval(
        "const c=document.querySelector(\"tr[data-config='w0'] td.param.not-applicable[data-param='prefetch']\"); return c ? [c.textContent.trim(), c.title] : null;",
        json!([]),
    )?;
    ensure!(
        cell == json!([
            "—",
            "prefetch does not apply: no worker processes or threads: prefetch applies only with workers > 0"
        ]),
        "w0's prefetch cell should be \"—\" with the reason as its title, found {cell}"
    );
    ctx.shot("newer-minor-not-applicable")
}
