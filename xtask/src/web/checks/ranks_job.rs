//! Browser check of a merged bundle of format 1.3 as `stallscope merge`
//! writes it (issue 20): the bundle names its job's figures; the rank ×
//! step heat map is drawn from the sidecar file fetched beside the bundle;
//! the straggler table names the slowed rank first and the rank search
//! finds it; and the compare view of a one-process bundle against the job
//! shows the scaling efficiency.
//!
//! The merged bundle's sidecars are written beside it, so `stallscope site`
//! carries them into the site as it does for a real merge.
use super::ctx::*;
use crate::web::rank_bundles::{EXPERIMENT, RankSpec, merged_id, per_rank_bundles};
use anyhow::{Context, Result, ensure};
use serde_json::json;
use std::path::{Path, PathBuf};

pub(super) const JOB_ID: &str = "generated-job-test";
pub(super) const SINGLE_ID: &str = "generated-job-test-one-process";
pub(super) const JOB_SPEC: RankSpec = RankSpec {
    world: 64,
    steps: 60,
    slow_rank: 41,
};

/// The merged bundle in format 1.3 (its sidecars beside it in `work/`)
/// and a one-process bundle of the same experiment (rank 0's, unranked).
pub(super) fn write_bundles(work: &Path) -> Result<[PathBuf; 2]> {
    let merged = stallscope_bundle::merge::merge(per_rank_bundles(&JOB_SPEC, JOB_ID).collect())?;
    let compacted = stallscope_bundle::merge::compact(merged);
    for (name, bytes) in &compacted.sidecars {
        std::fs::write(work.join(name), bytes)?;
    }
    let job = work.join("job.json");
    std::fs::write(&job, serde_json::to_vec(&compacted.bundle)?)?;
    let mut one = per_rank_bundles(&JOB_SPEC, SINGLE_ID)
        .next()
        .context("a generated rank")?;
    one.environment.rank = None;
    one.title = "Generated one-process loader run".into();
    let single = work.join("one-process.json");
    std::fs::write(&single, serde_json::to_vec(&one)?)?;
    Ok([job, single])
}

pub(super) fn job_and_sidecar_heat_map(ctx: &Ctx) -> Result<()> {
    let (id, slow) = (merged_id(JOB_ID), JOB_SPEC.slow_rank);
    ctx.open_experiment(&id, EXPERIMENT)?;
    ctx.browser.wait_for(
        "the heat map drawn from the sidecar",
        "const c=document.querySelector('.rank-view canvas.chart-canvas'); return c && c.dataset.drawn==='1' && !!document.querySelector('.straggler-table tbody tr');",
        WAIT,
    )?;
    let job = ctx.text(".rank-view .job-figures")?;
    ensure!(
        job.starts_with(&format!("Job of {} ranks: ", JOB_SPEC.world)),
        "the job's figures: {job:?}"
    );
    let first = ctx.text(".straggler-table tbody tr:first-child th.rank")?;
    ensure!(
        first == slow.to_string(),
        "the straggler table names rank {first} first, not {slow}"
    );
    ctx.browser.eval(
        "const i=document.querySelector('#rank-find'); i.value=arguments[0]; i.dispatchEvent(new Event('input',{bubbles:true}));",
        json!([slow.to_string()]),
    )?;
    let found = ctx.browser.wait_for(
        "the rank search",
        "const f=document.querySelector('.found-rank'); return f ? f.dataset.rank || 'none' : null;",
        WAIT,
    )?;
    ensure!(
        found == json!(slow.to_string()),
        "the rank search for {slow} found {found}"
    );
    ctx.shot("experiment-job-heat-map")?;
    ctx.open(&format!("#/compare/{SINGLE_ID}/{id}"))?;
    let efficiency = ctx.browser.wait_for(
        "the scaling table",
        "const e=document.querySelector('.scaling-table tbody tr .efficiency'); return e ? e.textContent : null;",
        WAIT,
    )?;
    let text = efficiency.as_str().unwrap_or_default();
    ensure!(text.ends_with('%'), "the scaling efficiency reads {text:?}");
    ctx.shot("compare-scaling")?;
    Ok(())
}
