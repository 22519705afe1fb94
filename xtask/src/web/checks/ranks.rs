//! Browser check of a generated merged multi-rank bundle: the bundle page
//! lists every rank with its host; the experiment page draws the rank ×
//! step heat map (the slowed rank's comm row the lightest: it waits least),
//! names the slowed rank first in the straggler table with the verdict, and
//! draws the timeline with the reason the GPU series are missing.
use super::ctx::*;
use crate::web::rank_bundles::{EXPERIMENT, NO_GPU, RankSpec, merged_id};
use anyhow::{Context, Result, ensure};
use serde_json::json;

pub(super) const RANKS_ID: &str = "generated-ranks-test";
pub(super) const SPEC: RankSpec = RankSpec {
    world: 16,
    steps: 120,
    slow_rank: 11,
};

/// JS: the mean green channel of every rank's row of the heat map (lighter
/// = less time), in the chart's layout (rank_heat.rs margins, CSS px).
const ROW_LIGHTNESS: &str = "const c=document.querySelector('.rank-view canvas.chart-canvas'); const n=arguments[0]; const d=window.devicePixelRatio||1; const x=c.getContext('2d'); const [l,r,t,b]=[56,110,28,34]; const w=(c.clientWidth-l-r)*d, h=(c.clientHeight-t-b)*d; const out=[]; for(let i=0;i<n;i++){ const y=Math.floor(t*d+(i+0.5)*h/n); const px=x.getImageData(Math.ceil(l*d),y,Math.floor(w)-2,1).data; let g=0; for(let k=1;k<px.length;k+=4) g+=px[k]; out.push(g/(px.length/4)); } return out;";

pub(super) fn rank_view_names_the_straggler(ctx: &Ctx) -> Result<()> {
    let world = SPEC.world as usize;
    let slow = SPEC.slow_rank;
    let id = merged_id(RANKS_ID);
    rank_list_has_every_rank(ctx, &id, world)?;
    ctx.open_experiment(&id, EXPERIMENT)?;
    ctx.browser.wait_for(
        "the rank view and its straggler table",
        "const c=document.querySelector('.rank-view canvas.chart-canvas'); return c && c.dataset.drawn==='1' && !!document.querySelector('.straggler-table tbody tr');",
        WAIT,
    )?;
    let first = ctx.text(".straggler-table tbody tr:first-child th.rank")?;
    ensure!(
        first == slow.to_string(),
        "the straggler table should name rank {slow} first, found rank {first}"
    );
    let times: u64 = ctx
        .text(".straggler-table tbody tr:first-child .straggler-steps")?
        .parse()
        .context("straggler count")?;
    ensure!(
        times > 0 && times <= SPEC.steps as u64,
        "rank {slow} was the straggler {times} times of {} steps",
        SPEC.steps
    );
    let verdict = ctx.text(".rank-verdict")?;
    ensure!(
        verdict.to_lowercase().contains(&format!("rank {slow} ")),
        "the rank verdict should name rank {slow}: {verdict:?}"
    );
    let stage = ctx.browser.eval(
        "return document.querySelector('#rank-stage').value;",
        json!([]),
    )?;
    ensure!(
        stage == json!("comm"),
        "the heat map should show comm first, shows {stage}"
    );
    lightest_comm_row_is(ctx, world, slow)?;

    ctx.browser.wait_for(
        "the timeline chart",
        "const c=document.querySelector('.timeline-charts canvas.chart-canvas'); return c && c.dataset.drawn==='1';",
        WAIT,
    )?;
    let gpu = ctx.text(".timeline-charts .gpu-not-available")?;
    ensure!(
        gpu.contains(NO_GPU),
        "the timeline should say why there is no GPU: {gpu:?}"
    );
    let cost = ctx.text(".cost-table tr[data-config='w1'] td")?;
    ensure!(
        cost.parse::<f64>().is_ok_and(|v| v > 0.0),
        "the cost table's CPU-s per 1,000 samples of w1: {cost:?}"
    );
    ctx.shot("experiment-ranks")?;
    for (css, name) in [
        (".timeline-charts", "experiment-ranks-timeline"),
        (".rank-view", "experiment-ranks-heat-map"),
    ] {
        ctx.browser.eval(
            "document.querySelector(arguments[0]).scrollIntoView();",
            json!([css]),
        )?;
        ctx.shot(name)?;
    }
    Ok(())
}

/// The bundle page lists every rank with its host.
fn rank_list_has_every_rank(ctx: &Ctx, id: &str, world: usize) -> Result<()> {
    ctx.open(&format!("#/b/{id}"))?;
    ctx.browser.wait_for(
        "the rank list",
        "return document.querySelectorAll('.rank-table tr[data-rank]').length > 0;",
        WAIT,
    )?;
    let rows = ctx.browser.eval(
        "return [...document.querySelectorAll('.rank-table tr[data-rank]')].map(r=>[+r.dataset.rank, r.querySelector('.hostname').textContent]);",
        json!([]),
    )?;
    let rows = rows.as_array().context("rank rows")?;
    ensure!(
        rows.len() == world,
        "expected {world} ranks listed, found {}",
        rows.len()
    );
    for (i, r) in rows.iter().enumerate() {
        let want = json!([i, format!("gen-node-{:03}", i / 8)]);
        ensure!(*r == want, "rank row {i} shows {r}, expected {want}");
    }
    let summary = ctx.text(".rank-summary")?;
    ensure!(
        summary.starts_with(&format!("{world} ranks of world size {world} on 2 hosts")),
        "rank summary: {summary:?}"
    );
    Ok(())
}

/// The heat map's lightest comm row (least waiting) is the slowed rank's.
fn lightest_comm_row_is(ctx: &Ctx, world: usize, slow: u32) -> Result<()> {
    let light = ctx.browser.eval(ROW_LIGHTNESS, json!([world]))?;
    let light: Vec<f64> = light
        .as_array()
        .context("row lightness")?
        .iter()
        .filter_map(|v| v.as_f64())
        .collect();
    ensure!(
        light.len() == world,
        "row lightness of {} rows",
        light.len()
    );
    let lightest = (0..world)
        .max_by(|a, b| light[*a].total_cmp(&light[*b]))
        .unwrap_or(0);
    ensure!(
        lightest == slow as usize,
        "the heat map's lightest comm row (least waiting) should be rank {slow}, is {lightest}: {light:?}"
    );
    Ok(())
}
