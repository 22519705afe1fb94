//! `cargo xtask demo`: build the runner, run the quickstart suite, export the site and serve it.
use crate::cmd::{Cmd, cargo};
pub(crate) use crate::paths::target_dir;
use crate::{setup, web};
use anyhow::{Result, bail};
use std::path::{Path, PathBuf};

/// What `cargo xtask demo [--no-serve] [RUN ARGS...]` was asked for.
#[derive(Debug, PartialEq)]
pub(crate) struct DemoArgs {
    /// Passed to `stallscope run` after the defaults.
    run_args: Vec<String>,
    /// Where `stallscope run` writes (its `--out`).
    out: PathBuf,
    serve: bool,
}

impl DemoArgs {
    pub(crate) fn parse(args: &[String]) -> Result<Self> {
        let mut run_args = Vec::new();
        let mut out = None;
        let mut serve = true;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--no-serve" {
                serve = false;
            } else if a == "--out" {
                let Some(dir) = it.next() else {
                    bail!("`--out` needs a folder after it");
                };
                out = Some(PathBuf::from(dir));
            } else if let Some(dir) = a.strip_prefix("--out=") {
                out = Some(PathBuf::from(dir));
            } else {
                run_args.push(a.clone());
            }
        }
        Ok(Self {
            run_args,
            out: out.unwrap_or_else(|| PathBuf::from("out/demo")),
            serve,
        })
    }

    /// Whether the arguments for `run` set `flag` themselves (`--flag V` or `--flag=V`).
    fn has_flag(&self, flag: &str) -> bool {
        self.run_args
            .iter()
            .any(|a| a == flag || a.strip_prefix(flag).is_some_and(|r| r.starts_with('=')))
    }
}

/// The main job: the first figure as soon as it can be (libtorch, the
/// release runner, the quickstart's report), then the viewer and its
/// tools, the site and the server.
pub(crate) fn run(repo: &Path, args: &[String]) -> Result<()> {
    let started = std::time::Instant::now();
    let demo = DemoArgs::parse(args)?;
    setup::run(repo, setup::Setup::Demo)?;
    let exe = release_runner(repo, None)?;
    let out = repo.join(&demo.out);
    // `run` prints the comparison table of each experiment and the bundle's path.
    let mut run = Cmd::new(&exe).arg("run");
    if !demo.has_flag("--preset") {
        run = run.args(["--preset", "quickstart"]);
    }
    if !demo.has_flag("--device") {
        run = run.args(["--device", "auto"]);
    }
    run.arg("--out").arg(&out).args(&demo.run_args).run()?;
    let bundle = out.join("bundle.json");
    if !bundle.is_file() {
        bail!(
            "`stallscope run` finished but {} is not there",
            bundle.display()
        );
    }
    println!(
        "demo: the first figure {:.0} s after the start; now the viewer for the site",
        started.elapsed().as_secs_f64()
    );
    setup::viewer_tools()?;
    let exe = build_release(repo)?;
    let site = out.join("site");
    Cmd::new(&exe)
        .arg("site")
        .arg(&bundle)
        .arg("--out")
        .arg(&site)
        .run()?;
    if demo.serve {
        // Prints the URL and serves until Ctrl-C.
        Cmd::new(&exe).arg("serve").arg(&site).run()?;
    } else {
        println!(
            "demo: the site is in {} (`--no-serve` given; `stallscope serve {}` serves it)",
            site.display(),
            site.display()
        );
    }
    Ok(())
}

/// `cargo xtask build`: the viewer into `target/web-dist`, then the release runner with it
/// embedded (so `stallscope site` works); returns the runner's path.
pub(crate) fn build_release(repo: &Path) -> Result<PathBuf> {
    let dist = web::build_dist(repo)?;
    let exe = release_runner(repo, Some(&dist))?;
    println!("build: {}", exe.display());
    Ok(exe)
}

/// `cargo build --release -p stallscope -p stallscope-loader` (the runner and the process
/// workers' program), embedding the viewer from `web_dist` when given; returns the
/// runner's path.
pub(crate) fn release_runner(repo: &Path, web_dist: Option<&Path>) -> Result<PathBuf> {
    let mut build = cargo();
    if let Some(dist) = web_dist {
        build = build.env("STALLSCOPE_WEB_DIST", dist);
    }
    build
        .args([
            "build",
            "--release",
            "-p",
            "stallscope",
            "-p",
            "stallscope-loader",
        ])
        .run()?;
    let exe = target_dir(repo).join("release").join("stallscope");
    if !exe.is_file() {
        bail!(
            "`cargo build --release -p stallscope -p stallscope-loader` finished but {} is not there",
            exe.display()
        );
    }
    Ok(exe)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> DemoArgs {
        DemoArgs::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn extra_args_go_to_run_and_no_serve_is_ours() {
        let d = parse(&["--quick", "--no-serve", "--device", "cpu"]);
        assert_eq!(d.run_args, ["--quick", "--device", "cpu"]);
        assert!(!d.serve);
        assert_eq!(d.out, PathBuf::from("out/demo"));
        assert!(parse(&[]).serve);
    }

    #[test]
    fn out_is_taken_in_both_spellings() {
        assert_eq!(parse(&["--out", "x/y"]).out, PathBuf::from("x/y"));
        assert_eq!(parse(&["--out=z", "--quick"]).out, PathBuf::from("z"));
        assert_eq!(parse(&["--out=z", "--quick"]).run_args, ["--quick"]);
        let err = DemoArgs::parse(&["--out".to_string()]).unwrap_err();
        assert!(err.to_string().contains("needs a folder"));
    }

    #[test]
    fn flags_given_for_run_replace_the_defaults() {
        let d = parse(&["--device=cpu", "--preset", "transfer"]);
        assert!(d.has_flag("--device"));
        assert!(d.has_flag("--preset"));
        assert!(!parse(&["--devices"]).has_flag("--device"));
        assert!(!parse(&["--quick"]).has_flag("--preset"));
    }
}
