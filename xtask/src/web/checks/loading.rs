//! Browser checks of loading: a site's bundles listed, bad files reported by
//! name while good ones stay, bundle text shown as text, drag-and-drop, and
//! the compare view.
use super::ctx::*;
use anyhow::{Result, bail, ensure};
use serde_json::json;
use std::time::Duration;

pub(super) fn site_lists_its_bundles(ctx: &Ctx) -> Result<()> {
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

pub(super) fn malformed_bundle_shows_message(ctx: &Ctx) -> Result<()> {
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

pub(super) fn too_large_bundle_refused(ctx: &Ctx) -> Result<()> {
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

pub(super) fn html_title_shown_as_text(ctx: &Ctx) -> Result<()> {
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

pub(super) fn dropped_file_is_loaded(ctx: &Ctx) -> Result<()> {
    let path = ctx.repo.join("fixtures/measured/wgpu-quick.json");
    let text = std::fs::read_to_string(&path)?;
    let title = read_json(&path)?["title"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    ctx.open("#/")?;
    // A real DragEvent with the file in its DataTransfer, as a person's drop.
    ctx.browser.eval(
        "const dt=new DataTransfer(); dt.items.add(new File([arguments[0]], 'wgpu-quick.json', {type:'application/json'})); document.querySelector('.drop-zone').dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));",
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
        "after dropping wgpu-quick.json the library lists {titles:?}"
    );
    Ok(())
}

pub(super) fn compare_view_lists_differences(ctx: &Ctx) -> Result<()> {
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
