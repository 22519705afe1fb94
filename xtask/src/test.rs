//! `cargo xtask test`: setup, then every check as a timed stage; stops at the first that fails.
use crate::cmd::{Cmd, cargo};
use crate::paths::target_dir;
use crate::{setup, web};
use anyhow::{Result, bail};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One stage: a name for the header and the work.
struct Stage<'a> {
    name: &'static str,
    what: &'static str,
    run: Box<dyn Fn() -> Result<()> + 'a>,
}

/// The stages in order. Plain `cargo clippy`/`cargo test` (no `--workspace`) cover the
/// default members (every crate of the workspace but `web`); `web` builds only for
/// wasm32, in `viewer-dist` and `web::test_built`. The viewer's dist is built before
/// clippy and the tests, so every runner build embeds the same files and the
/// end-to-end test in `tests/` finds the viewer in the runner it uses.
fn stages(repo: &Path) -> Vec<Stage<'_>> {
    vec![
        Stage {
            name: "setup",
            what: "cargo xtask setup --peers",
            run: Box::new(move || setup::run(repo, setup::Setup::Peers)),
        },
        Stage {
            name: "fmt",
            what: "formatting of every crate",
            run: Box::new(|| cargo().args(["fmt", "--all", "--", "--check"]).run()),
        },
        Stage {
            name: "structure",
            what: "module cycles, functions over 100 lines, unused dependencies, processes outside \
                   stallscope-python, crates' faces",
            run: Box::new(move || crate::structure::run(repo)),
        },
        Stage {
            name: "scripts",
            what: "bash -n and shellcheck of scripts/*.sh (the GPU check runs only on a GPU)",
            run: Box::new(move || check_scripts(repo)),
        },
        Stage {
            name: "viewer-dist",
            what: "the viewer's wasm build into target/web-dist, which the runner builds below embed",
            run: Box::new(move || web::build_dist(repo).map(drop)),
        },
        Stage {
            name: "clippy",
            what: "lints of the native crates, warnings denied",
            run: Box::new(move || {
                cargo()
                    .env("STALLSCOPE_WEB_DIST", web_dist(repo))
                    .args(["clippy", "--all-targets", "--", "-D", "warnings"])
                    .run()
            }),
        },
        Stage {
            name: "tests",
            what: "unit, integration and end-to-end tests (run → site → Chromium) of the native crates",
            run: Box::new(move || {
                cargo()
                    .env("STALLSCOPE_WEB_DIST", web_dist(repo))
                    // setup installed libturbojpeg0: its cases must run, not be skipped.
                    .env("STALLSCOPE_REQUIRE_TURBOJPEG", "1")
                    // Every failing test binary is reported, not only the first.
                    .args(["test", "--no-fail-fast"])
                    .run()
            }),
        },
        Stage {
            name: "harness",
            what: "the Python peers harness's own tests, in the peers' environment",
            run: Box::new(move || {
                Cmd::new(crate::peers::python()?)
                    .env("PYTHONPATH", repo.join("python"))
                    .args(["-m", "unittest", "discover", "-s"])
                    .arg(repo.join("python/tests"))
                    .run()
            }),
        },
        Stage {
            name: "wasm-shared",
            what: "the bundle format builds for the browser",
            run: Box::new(|| {
                cargo()
                    .args([
                        "build",
                        "-p",
                        "stallscope-bundle",
                        "--target",
                        "wasm32-unknown-unknown",
                    ])
                    .run()
            }),
        },
        Stage {
            name: "viewer",
            what: "the viewer's lints, unit tests and browser checks",
            run: Box::new(move || web::test_built(repo, &web_dist(repo))),
        },
    ]
}

/// `bash -n` and `shellcheck` over every script in `scripts/`: the GPU check
/// cannot run here, so its syntax and lints are what CI holds it to.
fn check_scripts(repo: &Path) -> Result<()> {
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(repo.join("scripts"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sh"))
        .collect();
    scripts.sort();
    if scripts.is_empty() {
        bail!("no scripts/*.sh found under {}", repo.display());
    }
    for script in &scripts {
        Cmd::new("bash").arg("-n").arg(script).run()?;
    }
    Cmd::new("shellcheck").args(&scripts).run()
}

/// Where `web::build_dist` puts the viewer. The runner's build script
/// embeds that folder; giving every runner build the same `STALLSCOPE_WEB_DIST` keeps
/// cargo from re-running it (and rebuilding the runner) between stages.
fn web_dist(repo: &Path) -> PathBuf {
    target_dir(repo).join("web-dist")
}

pub(crate) fn run(repo: &Path) -> Result<()> {
    let all = stages(repo);
    let total = all.len();
    let start = Instant::now();
    let mut passed = 0;
    for (i, stage) in all.iter().enumerate() {
        println!("\n==> [{}/{total}] {}: {}", i + 1, stage.name, stage.what);
        let t = Instant::now();
        let result = (stage.run)();
        let secs = t.elapsed().as_secs_f64();
        match result {
            Ok(()) => {
                passed += 1;
                println!("<== {} passed in {secs:.1} s", stage.name);
            }
            Err(e) => {
                println!("<== {} FAILED after {secs:.1} s: {e:#}", stage.name);
                println!(
                    "\nxtask test: {} passed, 1 failed ({}), {} not run; {:.0} s",
                    stages_word(passed),
                    stage.name,
                    total - passed - 1,
                    start.elapsed().as_secs_f64()
                );
                bail!("stage `{}` failed", stage.name);
            }
        }
    }
    println!(
        "\nxtask test: {} passed, 0 failed; {:.0} s",
        stages_word(passed),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn stages_word(n: usize) -> String {
    if n == 1 {
        "1 stage".to_owned()
    } else {
        format!("{n} stages")
    }
}
