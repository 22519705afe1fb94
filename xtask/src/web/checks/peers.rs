//! Browser check of a bundle from the three engines (native, PyTorch's
//! DataLoader, SPDL): engine is a column of the table with each
//! configuration's engine, and the charts are drawn with one series each.
use super::ctx::*;
use anyhow::{Context, Result, ensure};
use serde_json::json;

/// A measured bundle of `reproduce-seeds000.toml --quick` on this machine.
pub(super) const PEERS: &str = "fixtures/measured/cpu-peers-seeds000-quick.json";
/// The published PyTorch tutorial and a measured `reproduce-tutorial --quick`.
pub(super) const TUTORIAL: &str = "fixtures/published/pytorch-data-loading-tutorial.json";
pub(super) const TUTORIAL_RUN: &str = "fixtures/measured/cpu-reproduce-tutorial-quick.json";

/// Published vs yours: the compare view pairs every published DataLoader row
/// with the measured pytorch row of the same settings, with a ratio.
pub(super) fn published_tutorial_pairs_with_yours(ctx: &Ctx) -> Result<()> {
    let published = read_json(&ctx.repo.join(TUTORIAL))?;
    let measured = read_json(&ctx.repo.join(TUTORIAL_RUN))?;
    let (p, m) = (
        published["id"].as_str().unwrap_or_default(),
        measured["id"].as_str().unwrap_or_default(),
    );
    ctx.open(&format!("#/compare/{p}/{m}"))?;
    ctx.browser.wait_for(
        "the comparison",
        "return document.querySelectorAll('.compare-table tr[data-config]').length > 0;",
        WAIT,
    )?;
    let note = ctx.text(".compare-pair .note")?;
    ensure!(
        note.contains("published"),
        "no published-side note: {note:?}"
    );
    let mut paired = 0;
    for c in published["experiments"][0]["configurations"]
        .as_array()
        .context("configurations")?
    {
        let cid = c["id"].as_str().unwrap_or_default();
        if !cid.starts_with("pytorch-") {
            continue;
        }
        let ratio = ctx.text(&format!(
            ".compare-table tr[data-config='{cid}'] td:nth-child(4)"
        ))?;
        ensure!(
            ratio.ends_with('×'),
            "{cid}: the published row is not paired with a measured one (ratio cell {ratio:?})"
        );
        paired += 1;
    }
    ensure!(
        paired == 5,
        "expected the 5 DataLoader rows (batched fetch included) paired, found {paired}"
    );
    ctx.shot("compare-tutorial")
}

pub(super) fn engines_are_a_dimension(ctx: &Ctx) -> Result<()> {
    let b = read_json(&ctx.repo.join(PEERS))?;
    let id = b["id"].as_str().context("the peers bundle has an id")?;
    let e = b["experiments"]
        .as_array()
        .and_then(|es| {
            es.iter().find(|e| {
                e["swept"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|p| p == "engine"))
            })
        })
        .context("the peers bundle has an experiment swept over engine")?;
    let exp = e["id"].as_str().unwrap_or_default();
    ctx.open_experiment(id, exp)?;
    let mut seen = Vec::new();
    for c in e["configurations"].as_array().context("configurations")? {
        let cid = c["id"].as_str().unwrap_or_default();
        let want = c["params"]["engine"]
            .as_str()
            .with_context(|| format!("{cid} has an engine"))?;
        let got = ctx.text(&format!(
            "tr[data-config='{cid}'] td.param[data-param='engine']"
        ))?;
        ensure!(
            got == want,
            "{cid}: the engine cell shows {got:?}, the bundle says {want:?}"
        );
        if !seen.contains(&want) {
            seen.push(want);
        }
    }
    ensure!(
        seen == ["native", "pytorch", "spdl"],
        "expected the three engines in the table, found {seen:?}"
    );
    let heads = ctx.browser.eval(
        "return [...document.querySelectorAll('.comparison-table th.param-head')].map(t=>t.textContent);",
        json!([]),
    )?;
    ensure!(
        heads
            .as_array()
            .is_some_and(|h| h.iter().any(|t| t == "engine")),
        "no engine column heading: {heads}"
    );
    ctx.shot("experiment-peers")
}
