//! The workspace end to end: the real `stallscope run` (CPU, real libtorch,
//! real worker processes) writes a bundle into a temporary folder, the bundle
//! validates, `stallscope site` exports it with the embedded viewer,
//! `stallscope serve` serves it, and real headless Chromium shows the
//! bundle's title and an experiment's table with every configuration.
//! `STALLSCOPE_E2E=0` skips it, saying so; a missing browser, binary or
//! embedded viewer fails with the command that fixes it.
use serde_json::json;
use stallscope_bundle::{Bundle, parse_bundle, validate};
use stallscope_e2e::webdriver::{self, Browser};
use stallscope_e2e::{E2E_ENV, Server, skipped_by_env, target_binary};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Two experiment kinds, one with worker processes: seconds on 2 CPU cores.
const SUITE: &str = r#"
title = "e2e: run, site, browser"
seed = 11
repeats = 1
epochs = 2

[[experiment]]
id = "compute"
kind = "compute"
model = "linear"
features = 32
classes = 4
batch_sizes = [16, 32]
steps = 4

[[experiment]]
id = "loader"
kind = "loader"
model = "linear"
features = 16
classes = 4

[experiment.loader]
source = "tensor"
samples = 256
batch_size = 32
workers = [0, 2]
worker_kinds = ["processes"]
pinned = [true]
"#;

const WAIT: Duration = Duration::from_secs(30);

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn stallscope(runner: &Path, args: &[&Path]) -> Output {
    let mut c = Command::new(runner);
    c.env_remove("STALLSCOPE_INJECT_PANIC");
    for a in args {
        c.arg(a);
    }
    c.output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", runner.display()))
}

/// `target/` (the folder above `target/<profile>/`), for screenshots.
fn shots_dir(runner: &Path) -> PathBuf {
    runner
        .parent()
        .and_then(Path::parent)
        .map(|t| t.join("e2e-screenshots"))
        .unwrap_or_else(|| PathBuf::from("e2e-screenshots"))
}

#[test]
fn a_run_becomes_a_site_that_chromium_shows() {
    if skipped_by_env() {
        // Straight to stderr: libtest hides a passing test's `eprintln!`.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: {E2E_ENV}=0 is set; the run → site → Chromium test did not run"
        );
        return;
    }
    if let Some(why) = webdriver::missing() {
        panic!("{why} (or set {E2E_ENV}=0 to skip this test explicitly)");
    }
    let runner = target_binary("stallscope", "stallscope").unwrap_or_else(|e| panic!("{e}"));
    // Worker processes are this binary, found beside the runner.
    target_binary("stallscope-loader-worker", "stallscope-loader")
        .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let work = tempfile::Builder::new()
        .prefix("stallscope-e2e-")
        .tempdir()
        .expect("a temporary folder");
    let (bundle, bundle_file) = run_suite(&runner, work.path());
    let ran = started.elapsed();
    let site = export_site(&runner, work.path(), &bundle_file);
    let shots = shots_dir(&runner);
    check_in_chromium(&runner, &site, &bundle, &shots);
    eprintln!(
        "e2e: run {:.1} s, whole test {:.1} s; screenshot {}",
        ran.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        shots.join("experiment.png").display()
    );
}

/// run → bundle: `stallscope run` of [`SUITE`] into `work/out`; the bundle
/// validates and no configuration failed. The bundle and its file.
fn run_suite(runner: &Path, work: &Path) -> (Bundle, PathBuf) {
    let suite = work.join("suite.toml");
    std::fs::write(&suite, SUITE).expect("write the suite");
    let out = work.join("out");
    let o = Command::new(runner)
        .env_remove("STALLSCOPE_INJECT_PANIC")
        .arg("run")
        .arg(&suite)
        .args(["--device", "cpu", "--out"])
        .arg(&out)
        .output()
        .expect("run stallscope");
    assert_eq!(o.status.code(), Some(0), "stallscope run: {}", text(&o));
    let bundle_file = out.join("bundle.json");
    let bytes =
        std::fs::read(&bundle_file).unwrap_or_else(|e| panic!("{}: {e}", bundle_file.display()));
    let bundle: Bundle =
        parse_bundle(&bytes).unwrap_or_else(|e| panic!("{}: {e}", bundle_file.display()));
    let problems = validate(&bundle);
    assert!(
        problems.is_empty(),
        "{}: {problems:?}",
        bundle_file.display()
    );
    for id in ["compute", "loader"] {
        let e = bundle.experiment(id).unwrap_or_else(|| panic!("no {id}"));
        assert!(!e.configurations.is_empty(), "{id} has no configuration");
        for c in &e.configurations {
            assert!(c.failure.is_none(), "{id}/{}: {:?}", c.id, c.failure);
        }
    }
    (bundle, bundle_file)
}

/// bundle → site: `stallscope site` with the embedded viewer, into `work/site`.
fn export_site(runner: &Path, work: &Path, bundle_file: &Path) -> PathBuf {
    let site = work.join("site");
    let o = stallscope(
        runner,
        &[Path::new("site"), bundle_file, Path::new("--out"), &site],
    );
    if !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("without the viewer") {
        panic!(
            "{} has no embedded viewer, so this test cannot check the site: build the viewer and \
             the runner with it (`cargo xtask test` does; by hand: `cargo xtask build`, then \
             `STALLSCOPE_WEB_DIST=target/web-dist cargo build -p stallscope -p stallscope-loader`).\n{}",
            runner.display(),
            text(&o)
        );
    }
    assert!(o.status.success(), "stallscope site: {}", text(&o));
    for f in ["index.html", "index.json", "stallscope_web_bg.wasm"] {
        assert!(site.join(f).is_file(), "the site has no {f}");
    }
    site
}

/// site → served → Chromium: the library lists the bundle, and the compute
/// experiment's page shows its title and a row per configuration.
fn check_in_chromium(runner: &Path, site: &Path, bundle: &Bundle, shots: &Path) {
    let server = Server::start(runner, site).expect("stallscope serve");
    let browser = Browser::start(1280, 1600).expect("headless Chromium");
    let fail = |what: &str, e: anyhow::Error| -> ! {
        let shot = shots.join("failed.png");
        let _ = browser.screenshot(&shot);
        panic!("{what}: {e:#} (screenshot: {})", shot.display())
    };
    browser
        .goto(&server.url)
        .unwrap_or_else(|e| fail("open the site", e));
    let titles = browser
        .wait_for(
            "the site's bundle list",
            "const t=[...document.querySelectorAll('.bundle-link')].map(a=>a.textContent); return t.length ? t : null;",
            WAIT,
        )
        .unwrap_or_else(|e| fail("the library page", e));
    assert_eq!(
        titles,
        json!([bundle.title]),
        "the site lists its one bundle"
    );

    let experiment = bundle.experiment("compute").expect("compute");
    browser
        .goto(&format!(
            "{}#/b/{}/e/{}",
            server.url, bundle.id, experiment.id
        ))
        .unwrap_or_else(|e| fail("open the experiment page", e));
    let want: Vec<&str> = experiment
        .configurations
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    let shown = browser
        .wait_for(
            "the experiment's table",
            "const t=document.querySelector('.comparison-table'); if(!t) return null; \
             const h=document.querySelector('.experiment-title'); \
             return {title: h ? h.textContent : null, \
                     configs: [...new Set([...t.querySelectorAll('td[data-config]')].map(d=>d.dataset.config))]};",
            WAIT,
        )
        .unwrap_or_else(|e| fail("the experiment page", e));
    assert_eq!(shown["title"], json!(experiment.title), "{shown}");
    let mut configs: Vec<String> =
        serde_json::from_value(shown["configs"].clone()).expect("configuration ids");
    configs.sort();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(configs, want_sorted, "every configuration has a row");
    let visible = browser
        .eval(
            "const r=document.querySelector('.comparison-table').getBoundingClientRect(); return r.width>0 && r.height>0;",
            json!([]),
        )
        .unwrap_or_else(|e| fail("the table's size", e));
    assert_eq!(visible, json!(true), "the table is laid out, not hidden");
    browser
        .screenshot(&shots.join("experiment.png"))
        .unwrap_or_else(|e| fail("the screenshot", e));
}
