//! Browser check of a bundle from the three engines (native, PyTorch's
//! DataLoader, SPDL): engine is a column of the table with each
//! configuration's engine, and the charts are drawn with one series each.
use super::*;
use anyhow::{Context, Result, ensure};
use serde_json::json;

/// A measured bundle of `reproduce-seeds000.toml --quick` on this machine.
pub(super) const PEERS: &str = "fixtures/measured/cpu-peers-seeds000-quick.json";

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
