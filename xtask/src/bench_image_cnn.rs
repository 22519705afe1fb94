//! `cargo xtask bench image-cnn [--baseline RUNNER] [--rounds N]`: the image pipeline trained
//! into the image CNN (whole run, CPU), this build against a baseline in alternating runs (A B A
//! B …), so both see the same machine; prints each side's median whole-run steady images/s and
//! the ratio. The baseline is this build decoding with zune-jpeg at full size, or another
//! runner binary (an older build) given with `--baseline`.
use crate::bench_goals::Spread;
use crate::bench_peers::run_suite;
use crate::demo::release_runner;
use crate::paths::target_dir;
use anyhow::{Context, Result, bail};
use stallscope_bundle::analysis::{Metric, MetricKey, metric_summary, show_ratio};
use stallscope_bundle::{Bundle, Phase, TimingMode};
use std::path::{Path, PathBuf};

const SUITE: &str = "fixtures/bench/image-cnn.toml";

struct Args {
    baseline: Option<PathBuf>,
    rounds: usize,
}

fn parse(args: &[String]) -> Result<Args> {
    let mut out = Args {
        baseline: None,
        rounds: 3,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--baseline" => {
                let p = it.next().context("--baseline needs a runner binary")?;
                out.baseline = Some(PathBuf::from(p));
            }
            "--rounds" => {
                let n = it.next().context("--rounds needs a number")?;
                out.rounds = n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .with_context(|| format!("--rounds {n:?}: expected a positive integer"))?;
            }
            other => {
                bail!("bench image-cnn: unknown argument {other:?} (--baseline RUNNER, --rounds N)")
            }
        }
    }
    Ok(out)
}

/// The single configuration's median whole-run steady images/s.
pub(crate) fn steady_rate(bundle: &Bundle) -> Result<f64> {
    let c = bundle
        .experiments
        .first()
        .and_then(|e| e.configurations.first())
        .context("the bundle has no configuration")?;
    let key = MetricKey::new(Metric::SamplesPerS, TimingMode::WholeRun, Phase::Steady);
    metric_summary(c, &key)
        .map(|s| s.median)
        .with_context(|| format!("configuration {} has no whole-run steady samples/s", c.id))
}

pub(crate) fn run(repo: &Path, args: &[String]) -> Result<()> {
    let args = parse(args)?;
    let exe = release_runner(repo, None)?;
    let suite = repo.join(SUITE);
    let dir = target_dir(repo).join("bench").join("image-cnn");
    let (base_exe, base_suite, base_name) = match &args.baseline {
        Some(b) => (
            b.clone(),
            suite.clone(),
            format!("baseline runner {}", b.display()),
        ),
        None => {
            let text = std::fs::read_to_string(&suite)
                .with_context(|| format!("reading {}", suite.display()))?;
            let variant = text.replace(
                "shuffle = true",
                "shuffle = true\ndecoder = \"zune-jpeg\"\nscaled_decode = false",
            );
            std::fs::create_dir_all(&dir)?;
            let path = dir.join("baseline-zune.toml");
            std::fs::write(&path, variant)?;
            (
                exe.clone(),
                path,
                "this build, zune-jpeg, full-size decode".to_string(),
            )
        }
    };
    let (mut this, mut base) = (Vec::new(), Vec::new());
    for round in 0..args.rounds {
        // Alternate which side goes first, so neither always runs on a warmer machine.
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for is_this in order {
            let (e, s, v) = if is_this {
                (&exe, &suite, &mut this)
            } else {
                (&base_exe, &base_suite, &mut base)
            };
            let out = dir.join(format!("{}-{round}", if is_this { "this" } else { "base" }));
            let bundle = run_suite(repo, e, s, &out)?;
            v.push(steady_rate(&bundle).with_context(|| format!("{}", out.display()))?);
        }
    }
    println!("{}", render(&base_name, &this, &base)?);
    Ok(())
}

pub(crate) fn render(base_name: &str, this: &[f64], base: &[f64]) -> Result<String> {
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (t, b) = (Spread::of(this)?.median, Spread::of(base)?.median);
    Ok(format!(
        "image-cnn: whole-run steady images/s, image pipeline into the image CNN (CPU), runs\n\
         alternating; median of {} rounds per side\n\n  this build   {t:>7.0}   [{}]\n  \
         baseline     {b:>7.0}   [{}]\n  ({base_name})\n\n  this ÷ baseline = {}\n",
        this.len(),
        list(this),
        list(base),
        show_ratio(t / b),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked() {
        assert_eq!(parse(&[]).unwrap().rounds, 3);
        let a = parse(&[
            "--baseline".into(),
            "/x".into(),
            "--rounds".into(),
            "5".into(),
        ])
        .unwrap();
        assert_eq!((a.baseline.unwrap(), a.rounds), (PathBuf::from("/x"), 5));
        let e = parse(&["--rounds".into(), "0".into()]).err().unwrap();
        assert!(e.to_string().contains("expected a positive integer"), "{e}");
        assert!(parse(&["--fast".into()]).is_err());
    }

    #[test]
    fn the_summary_shows_medians_and_the_ratio() {
        let s = render(
            "this build, zune-jpeg",
            &[100.0, 120.0, 110.0],
            &[90.0, 100.0, 95.0],
        )
        .unwrap();
        assert!(s.contains("this build       110   [100, 120, 110]"), "{s}");
        assert!(s.contains("baseline          95   [90, 100, 95]"), "{s}");
        assert!(s.contains("this ÷ baseline = 1.16×"), "{s}");
        assert!(s.lines().all(|l| l.chars().count() <= 100));
    }
}
