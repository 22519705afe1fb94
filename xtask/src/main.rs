//! `cargo xtask <task>`: setup, test, build, demo, bench, schema.
mod bench;
mod bench_best;
mod bench_compute;
mod bench_goals;
mod bench_image_cnn;
mod bench_job;
mod bench_peers;
mod bench_ranks;
mod cmd;
mod demo;
mod libtorch;
mod paths;
mod peers;
mod setup;
mod structure;
mod test;
mod web;

use anyhow::{Result, bail};
pub(crate) use paths::repo_root;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <task>
  setup [--peers]  install what is missing: libtorch 2.11.0 (CPU-loadable, cached), the wasm32
                   target, wasm-bindgen-cli 0.2.130, Debian's chromium, chromium-driver,
                   mesa-vulkan-drivers, binaryen, g++; --peers: also the Python of the peer
                   engines and of `stallscope job`'s tests (torch 2.11.0, torchvision, SPDL,
                   DALI, torchdata, Lightning, MONAI, accelerate, transformers) and FFmpeg
  test             setup --peers, then fmt, structure, the scripts' checks, the viewer's dist,
                   clippy, the tests, the harness's tests, the wasm build of shared and the
                   viewer's browser tests
  test-viewer      only the viewer's stage: its wasm build and the browser tests (after `setup`)
  build            the viewer into target/web-dist, then the release runner with it embedded
  demo [--no-serve] [RUN ARGS...]
                   build, `stallscope run --preset quickstart --device auto --out out/demo`,
                   then export the site to out/demo/site and serve it (until Ctrl-C)
  bench NAME       a benchmark, printed as ratios against its baseline run beside it:
                   overhead, loader, workers, loader-peers, compute-peers, image-cnn (--baseline
                   BIN), decode, job-overhead ([--pairs N] [--steps N] [--debug]), viewer, ranks;
                   `cargo xtask bench` alone lists what each measures
  structure        the layering rules over the sources: module cycles, functions over 100
                   lines, unused dependencies, processes started outside stallscope-python,
                   crates' faces
  schema           regenerate fixtures/schema/bundle.schema.json from the bundle types";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}`: the message and its causes on one line, without a backtrace.
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repo = repo_root();
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("setup") => match rest {
            [] => setup::run(&repo, setup::Setup::Tests),
            [flag] if flag == "--peers" => setup::run(&repo, setup::Setup::Peers),
            other => bail!("`cargo xtask setup` takes only --peers (got {other:?})"),
        },
        Some("test") => test::run(&repo),
        Some("test-viewer") => web::test(),
        Some("demo") => demo::run(&repo, rest),
        Some("build") => demo::build_release(&repo).map(drop),
        Some("bench") => bench::run(&repo, rest),
        Some("schema") => bench::schema(),
        Some("structure") => structure::run(&repo),
        Some("help" | "--help" | "-h") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown task `{other}`\n{USAGE}"),
        None => bail!("no task given\n{USAGE}"),
    }
}
