//! `cargo xtask bench viewer`: the wasm's size (raw and gzip), and the time in
//! headless Chromium from navigation to a rendered experiment page (table and
//! every chart drawn) for the published bundle and for a generated bundle
//! with 1,000,000 per-step records — each beside the bundle's size and the
//! browser's own `JSON.parse` time of the same file as the baseline.
use super::site::{Server, export_site};
use anyhow::{Context, Result};
use serde_json::{Value, json};
use stallscope_bundle::*;
use stallscope_e2e::webdriver::Browser;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const STEPS: usize = 1_000_000;
const REPEATS: usize = 3;
const LARGE_ID: &str = "bench-one-million-steps";

/// The wasm's size, raw and gzipped, against its target.
fn wasm_size(dist: &Path) -> Result<()> {
    let wasm = dist.join("stallscope_web_bg.wasm");
    let raw = std::fs::metadata(&wasm)?.len();
    let gz = gzip_size(&wasm)?;
    println!(
        "viewer wasm: {} raw, {} gzip ({})",
        kb(raw),
        kb(gz),
        wasm.display()
    );
    println!(
        "  target: under 1,500,000 bytes raw ({}): {}",
        kb(1_500_000),
        if raw < 1_500_000 { "met" } else { "NOT met" }
    );
    Ok(())
}

pub(super) fn run(repo: &Path, dist: &Path, runner: &Path) -> Result<()> {
    wasm_size(dist)?;
    let work = tempfile::Builder::new()
        .prefix("stallscope-viewer-bench-")
        .tempdir()?;
    let large = work.path().join("large.json");
    std::fs::write(
        &large,
        serde_json::to_vec(&generated_bundle(STEPS, LARGE_ID))?,
    )?;
    let published = repo.join("fixtures/published/fashionmnist-batch-sweep.json");
    // One site per bundle, so neither page waits for the other bundle's read.
    export_site(
        runner,
        std::slice::from_ref(&published),
        &work.path().join("published"),
    )?;
    export_site(
        runner,
        std::slice::from_ref(&large),
        &work.path().join("large"),
    )?;
    let server = Server::start(runner, work.path())?;
    let browser = Browser::start(1280, 1000)?;
    println!(
        "\nnavigation → rendered experiment page (table + every chart drawn), {REPEATS} loads each, headless Chromium:"
    );
    for (path, id, exp, site, file) in [
        (
            &published,
            "published-seeds-003-fashionmnist-batch-sweep",
            "batch_sweep",
            "published/",
            "bundles/01-fashionmnist-batch-sweep.json",
        ),
        (
            &large,
            LARGE_ID,
            "loader",
            "large/",
            "bundles/01-large.json",
        ),
    ] {
        time_render(&browser, &server.url, path, (id, exp, site, file))?;
    }
    // The viewer's own read (read_bundle: parse + validation), as it reports it.
    for site in ["published", "large"] {
        browser.goto(&format!("{}{site}/#/", server.url))?;
        let v: Value = browser.wait_for(
            "the library",
            "const r=document.querySelector('.read-cost'); return r && !document.querySelector('.pending') ? r.textContent : null;",
            Duration::from_secs(60),
        )?;
        println!("  the viewer's read_bundle of the {site} bundle (size, time): {v}");
    }
    drop(server);
    Ok(())
}

/// Load one site's experiment page REPEATS times: the time to a rendered
/// page (every chart drawn) against the browser's own JSON.parse of it.
fn time_render(
    browser: &Browser,
    url: &str,
    path: &Path,
    (id, exp, site, file): (&str, &str, &str, &str),
) -> Result<()> {
    let size = std::fs::metadata(path)?.len();
    let mut render = Vec::new();
    let mut parse = Vec::new();
    for _ in 0..REPEATS {
        browser.goto("about:blank")?;
        browser.goto(&format!("{}{site}#/b/{id}/e/{exp}", url))?;
        let ready = "const c=[...document.querySelectorAll('canvas.chart-canvas')]; return document.querySelector('.comparison-table') && c.length>0 && c.every(x=>x.dataset.drawn==='1') ? Math.max(...c.map(x=>+x.dataset.drawnAt)) : null;";
        let ms = browser.wait_for("the rendered page", ready, Duration::from_secs(60))?;
        render.push(ms.as_f64().context("no time")?);
        let p = browser.eval_async(
            "const done=arguments[arguments.length-1]; fetch(arguments[0]).then(r=>r.text()).then(t=>{const t0=performance.now(); JSON.parse(t); done(performance.now()-t0);});",
            json!([file]),
        )?;
        parse.push(p.as_f64().context("no parse time")?);
    }
    let (r, p) = (median(&mut render), median(&mut parse));
    let ratio = if p >= 0.1 {
        format!("{:.1}× the parse", r / p)
    } else {
        "the parse is below the browser's timer resolution".to_string()
    };
    let all: Vec<String> = render.iter().map(|v| format!("{v:.0}")).collect();
    println!(
        "  {id}: {} bundle; rendered in {r:.0} ms (median; {}); browser JSON.parse {p:.1} ms → {ratio}",
        kb(size),
        all.join(", "),
    );
    if id == LARGE_ID {
        println!(
            "  target: 1,000,000-step bundle rendered under 2 s: {}",
            if r < 2000.0 { "met" } else { "NOT met" }
        );
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Bytes in IEC units, as everywhere (`1.38 MiB`).
fn kb(bytes: u64) -> String {
    stallscope_bundle::analysis::show_bytes(bytes as f64)
}

fn gzip_size(path: &Path) -> Result<u64> {
    let out = std::process::Command::new("gzip")
        .args(["-9", "-c"])
        .arg(path)
        .output()
        .context("cannot run gzip")?;
    anyhow::ensure!(out.status.success(), "gzip failed");
    Ok(out.stdout.len() as u64)
}

/// The environment of a generated bundle: this xtask as the runner, `host`,
/// and no device measured.
pub(super) fn generated_environment(runner: &str, host: HostInfo) -> Environment {
    Environment {
        runner: Some(RunnerInfo {
            name: runner.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            commit: None,
        }),
        host: Some(host),
        device: Some(DeviceInfo::new(
            DeviceKind::Cpu,
            "generated: no device was measured",
        )),
        ..Default::default()
    }
}

/// The diagnostic figures of generated step columns (the first step apart,
/// as the loop does): the stages' statistics, the epoch's seconds and samples.
fn diagnostic_of(steps: &StepSeries, n: usize) -> (Diagnostic, f64, u64) {
    let stat = |col: &[u64]| {
        let mut v: Vec<u64> = col[1..].to_vec();
        v.sort_unstable();
        let s = |x: u64| x as f64 * 1e-9;
        StageStat {
            mean_s: Some(s(v.iter().sum::<u64>() / v.len() as u64)),
            median_s: Some(s(v[v.len() / 2])),
            p95_s: Some(s(v[v.len() * 95 / 100])),
            min_s: Some(s(v[0])),
            max_s: Some(s(v[v.len() - 1])),
            total_s: Some(s(v.iter().sum())),
            count: Some(v.len() as u64),
        }
    };
    let step: Vec<u64> = (0..n)
        .map(|i| steps.next_wait_ns[i] + steps.transfer_ns[i] + steps.compute_ns[i])
        .collect();
    let total_s = step.iter().sum::<u64>() as f64 * 1e-9;
    let samples = (n * 32) as u64;
    let diagnostic = Diagnostic {
        seconds: Some(total_s),
        samples: Some(samples),
        steps: Some(n as u64),
        bytes: None,
        iterator_creation_s: Some(0.001),
        first_next_wait_s: Some(steps.next_wait_ns[0] as f64 * 1e-9),
        next_wait: Some(stat(&steps.next_wait_ns)),
        transfer: Some(stat(&steps.transfer_ns)),
        compute: Some(stat(&steps.compute_ns)),
        comm: None,
        step: Some(stat(&step)),
    };
    (diagnostic, total_s, samples)
}

/// A bundle with one loader configuration whose diagnostic run has `n`
/// per-step records (deterministic pseudo-random times), plus its whole run.
/// Not a measurement: its environment and title say it is generated.
pub(super) fn generated_bundle(n: usize, id: &str) -> Bundle {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |base: u64, spread: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        base + state % spread
    };
    let mut steps = StepSeries::default();
    for _ in 0..n {
        steps.next_wait_ns.push(next(20_000, 200_000));
        steps.transfer_ns.push(next(5_000, 10_000));
        steps.compute_ns.push(next(300_000, 100_000));
    }
    let (diagnostic, total_s, samples) = diagnostic_of(&steps, n);
    let whole_seconds = total_s * 0.8;
    let runs = vec![
        Run {
            whole_run: Some(WholeRun {
                seconds: Some(whole_seconds),
                samples: Some(samples),
                samples_per_s: Some(samples as f64 / whole_seconds),
                steps: Some(n as u64),
                ..Default::default()
            }),
            ..Run::new("r0-e0-whole_run", TimingMode::WholeRun, 0, 0, Phase::Cold)
        },
        Run {
            diagnostic: Some(diagnostic),
            steps: Some(steps),
            ..Run::new(
                "r0-e0-diagnostic",
                TimingMode::Diagnostic,
                0,
                0,
                Phase::Cold,
            )
        },
    ];
    let mut params = BTreeMap::new();
    params.insert("workers".to_string(), ParamValue::Int(2));
    Bundle {
        schema_version: SchemaVersion::CURRENT,
        id: id.into(),
        title: format!("Generated: one diagnostic run with {n} per-step records"),
        created_at: "2026-11-30T00:00:00Z".into(),
        provenance: Provenance::Measured,
        environment: generated_environment(
            "cargo xtask bench viewer (generated)",
            HostInfo {
                os: Some("generated: no host was measured".into()),
                ..Default::default()
            },
        ),
        experiments: vec![
            Experiment::new("loader", ExperimentKind::Loader, "Generated loader run")
                .with_description("Synthetic per-step times generated by `cargo xtask bench viewer`; not a measurement.")
                .with_swept(["workers"])
                .with_configurations(vec![
                    Configuration::new("w2", "2 workers")
                        .with_params(params)
                        .with_runs(runs),
                ]),
        ],
        status: RunStatus {
            state: RunState::Complete,
            message: None,
        },
        ranks: Vec::new(),
        notes: vec!["Generated for the viewer benchmark.".into()],
    }
}
