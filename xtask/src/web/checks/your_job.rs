//! Browser check of a measured `stallscope job --tune` bundle (issue 19):
//! the bundle page answers the job's question as `analysis::job_digest`
//! reads the same file — the command, the recommendation as the change to
//! make with its verified A/B ratio, the replay ceiling's stall, and every
//! process's RSS, PSS and USS — and the job experiment's table carries the
//! per-worker memory columns.
use super::ctx::*;
use anyhow::{Context, Result, ensure};
use stallscope_bundle::analysis::{job_digest, show_bytes, show_percent, show_ratio};

pub(super) const JOB: &str = "fixtures/measured/cpu-job-tune.json";

pub(super) fn job_page_answers_the_question(ctx: &Ctx) -> Result<()> {
    let bytes = std::fs::read(ctx.repo.join(JOB))?;
    let bundle = stallscope_bundle::read_bundle(&bytes)?;
    let d = job_digest(&bundle).context("the fixture has no job experiment")?;
    ctx.open(&format!("#/b/{}", bundle.id))?;
    ctx.browser.wait_for(
        "the job panel",
        "return !!document.querySelector('.your-job');",
        WAIT,
    )?;
    let command = ctx.text(".job-command code")?;
    ensure!(
        Some(&command) == d.command.as_ref(),
        "the command reads {command:?}, the bundle {:?}",
        d.command
    );
    let r = d
        .recommendation
        .as_ref()
        .context("the fixture has no recommendation")?;
    let change = ctx.text("pre.job-change")?;
    ensure!(
        Some(&change) == r.change.as_ref(),
        "the change reads {change:?}, the bundle {:?}",
        r.change
    );
    let v = r
        .verification
        .as_ref()
        .context("the fixture has no verification")?;
    let ratio = ctx.text(".job-verified .job-ratio")?;
    ensure!(
        ratio == show_ratio(v.median),
        "the verified ratio reads {ratio:?}"
    );
    let confirmed = ctx.browser.eval(
        "return !!document.querySelector('.job-verified.confirmed');",
        json!([]),
    )?;
    ensure!(
        confirmed == json!(v.confirmed),
        "confirmed is shown as {confirmed}, the bundle says {}",
        v.confirmed
    );
    let stall = d.script_stall.context("the fixture has no replay stall")?;
    let line = ctx.text(".job-stall")?;
    ensure!(
        stall <= 0.0 || line.contains(&show_percent(stall)),
        "the replay's stall line {line:?} lacks {}",
        show_percent(stall)
    );
    memory_table(ctx, &d)?;
    ctx.shot("bundle-job")?;
    ctx.open_experiment(&bundle.id, "job")?;
    ctx.column("worker USS")?;
    Ok(())
}

/// Every process of every configuration, in order, with its USS.
fn memory_table(ctx: &Ctx, d: &stallscope_bundle::analysis::JobDigest) -> Result<()> {
    let want: Vec<String> = d
        .memory
        .iter()
        .flat_map(|c| &c.processes)
        .map(|p| p.uss_bytes.map_or("—".into(), |b| show_bytes(b as f64)))
        .collect();
    ensure!(
        d.memory
            .iter()
            .flat_map(|c| &c.processes)
            .any(|p| p.role == "worker" && p.uss_bytes.is_some()),
        "the fixture has no worker with a USS"
    );
    let shown = ctx.browser.eval(
        "return [...document.querySelectorAll('.worker-memory-table tbody tr td.uss')].map(t=>t.textContent);",
        json!([]),
    )?;
    ensure!(
        shown == json!(want),
        "the USS column reads {shown}, the bundle {want:?}"
    );
    Ok(())
}
