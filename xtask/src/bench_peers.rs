//! `cargo xtask bench loader-peers`: the native loader against PyTorch's DataLoader and SPDL on
//! the JPEG pipeline of `fixtures/bench/loader-peers.toml`, in one release run whose repeats
//! interleave the engines; prints each engine's best configuration and the ratios. Around the
//! suite (before and after it, same build) it runs `stallscope bare-images`: the bare per-image
//! function on one thread, whose rate × cores is the limit the loader is held to, and whose
//! untimed and timed passes measure the stage clocks' overhead. The goals block reports each
//! goal as met or NOT met; a missed goal does not fail the bench, a failed run or a missing
//! number does.
use crate::cmd::Cmd;
use crate::demo::{release_runner, target_dir};
use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use stallscope_bundle::analysis::{
    Metric, MetricKey, group_thousands, metric_summary, show_bytes, show_ratio,
};
use stallscope_bundle::{Bundle, Configuration, Engine, Phase, TimingMode, read_bundle};
use std::path::Path;

const SUITE: &str = "fixtures/bench/loader-peers.toml";
const KEPT: &str = "fixtures/bench/loader-peers.json";
const KEPT_BARE: &str = "fixtures/bench/loader-peers-bare.json";
const ENGINES: [Engine; 3] = [Engine::Native, Engine::Pytorch, Engine::Spdl];
/// Passes of each `bare-images` run: alternately untimed and timed.
const BARE_PASSES: u32 = 4;

/// `stallscope run SUITE --device cpu --out OUT` with this checkout's peers harness, into a
/// fresh OUT; returns the bundle read back.
pub(crate) fn run_suite(repo: &Path, exe: &Path, suite: &Path, out: &Path) -> Result<Bundle> {
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("removing {}", out.display()))?;
    }
    Cmd::new(exe)
        .env("STALLSCOPE_HARNESS_DIR", repo.join("python"))
        .arg("run")
        .arg(suite)
        .args(["--device", "cpu", "--out"])
        .arg(out)
        .run()?;
    let path = out.join("bundle.json");
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    read_bundle(&bytes).with_context(|| format!("reading {}", path.display()))
}

/// `stallscope bare-images SUITE --passes N`, parsed; `when` names the run in errors.
fn run_bare(exe: &Path, suite: &Path, when: &str) -> Result<(Bare, Value)> {
    eprintln!(
        "$ {} bare-images {} --passes {BARE_PASSES}   ({when})",
        exe.display(),
        suite.display()
    );
    let text = Cmd::new(exe)
        .arg("bare-images")
        .arg(suite)
        .args(["--passes", &BARE_PASSES.to_string()])
        .read()
        .with_context(|| format!("bare-images {when}"))?;
    parse_bare(&text).with_context(|| format!("bare-images {when}: its JSON"))
}

pub(crate) fn run(repo: &Path) -> Result<()> {
    let exe = release_runner(repo, None)?;
    let suite = repo.join(SUITE);
    let out = target_dir(repo).join("bench").join("loader-peers");
    let (before, before_json) = run_bare(&exe, &suite, "before the suite")?;
    let bundle = run_suite(repo, &exe, &suite, &out)?;
    let (after, after_json) = run_bare(&exe, &suite, "after the suite")?;
    let rows = best_per_engine(&bundle)?;
    println!("{}", render(&rows));
    let bundle_path = out.join("bundle.json");
    let experiment = bundle.experiments.first().map(|e| e.id.as_str());
    ensure!(
        experiment == Some(before.experiment.as_str()),
        "bare-images measured experiment {:?} but the bundle's is {experiment:?} ({})",
        before.experiment,
        bundle_path.display()
    );
    let cores = std::thread::available_parallelism()
        .context("std::thread::available_parallelism (the cores of the limit)")?
        .get();
    // Before keeping anything: a missing number fails here, leaving the kept files as they were.
    let goals = goals(&rows, &before, &after, cores)
        .with_context(|| format!("the goals of {}", bundle_path.display()))?;
    std::fs::copy(&bundle_path, repo.join(KEPT))
        .with_context(|| format!("copying the bundle to {KEPT}"))?;
    let bare = serde_json::json!({ "before": before_json, "after": after_json });
    std::fs::write(
        repo.join(KEPT_BARE),
        serde_json::to_string_pretty(&bare)? + "\n",
    )
    .with_context(|| format!("writing {KEPT_BARE}"))?;
    println!("{}", render_goals(&goals));
    println!("bundle: {} (kept as {KEPT})", bundle_path.display());
    println!("bare-images, before and after the suite: kept as {KEPT_BARE}");
    Ok(())
}

/// One engine's best configuration by median whole-run steady samples/s.
#[derive(Debug, PartialEq)]
pub(crate) struct Best {
    pub(crate) engine: Engine,
    /// `None` when no configuration of the engine has a steady whole-run figure.
    pub(crate) best: Option<BestConfig>,
}

#[derive(Debug, PartialEq)]
pub(crate) struct BestConfig {
    pub(crate) label: String,
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) runs: usize,
    /// The largest `memory.host_peak_rss_bytes` of the configuration's runs (both modes).
    pub(crate) peak_rss: Option<u64>,
}

fn best_config(c: &Configuration) -> Option<BestConfig> {
    let key = MetricKey::new(Metric::SamplesPerS, TimingMode::WholeRun, Phase::Steady);
    let s = metric_summary(c, &key)?;
    Some(BestConfig {
        label: c.label.clone(),
        median: s.median,
        min: s.min,
        max: s.max,
        runs: s.n,
        peak_rss: c
            .runs
            .iter()
            .filter_map(|r| r.memory.as_ref()?.host_peak_rss_bytes)
            .max(),
    })
}

/// Per engine (native, pytorch, spdl) the best configuration of the bundle's loader experiment.
pub(crate) fn best_per_engine(bundle: &Bundle) -> Result<Vec<Best>> {
    let Some(e) = bundle.experiments.first() else {
        bail!("the bundle has no experiment");
    };
    Ok(ENGINES
        .into_iter()
        .map(|engine| {
            let best = e
                .configurations
                .iter()
                .filter(|c| *c.engine_or_native() == engine)
                .filter_map(best_config)
                .max_by(|a, b| a.median.total_cmp(&b.median));
            Best { engine, best }
        })
        .collect())
}

fn rate(v: f64) -> String {
    group_thousands(&format!("{v:.0}"))
}

fn rate1(v: f64) -> String {
    group_thousands(&format!("{v:.1}"))
}

/// The summary table (under 100 columns) and the two ratios.
pub(crate) fn render(rows: &[Best]) -> String {
    let mut s = String::from(
        "loader-peers: best configuration per engine, images/s (whole-run, steady; median of the\n\
         repeats, [min–max]); peak host RSS = max of the runs' host_peak_rss_bytes\n\n",
    );
    s += &format!(
        "  {:<8} {:<30} {:>9} {:>19} {:>14}\n",
        "engine", "best configuration", "images/s", "[min–max]", "peak host RSS"
    );
    s += &format!("  {}\n", "-".repeat(84));
    for r in rows {
        match &r.best {
            Some(b) => {
                s += &format!(
                    "  {:<8} {:<30} {:>9} {:>19} {:>14}\n",
                    r.engine.as_str(),
                    truncate(&b.label, 30),
                    rate(b.median),
                    format!("[{}–{}] n={}", rate(b.min), rate(b.max), b.runs),
                    b.peak_rss.map_or("—".into(), |v| show_bytes(v as f64)),
                );
            }
            None => {
                s += &format!(
                    "  {:<8} no configuration with a whole-run steady figure (see the report)\n",
                    r.engine.as_str()
                );
            }
        }
    }
    let median = |e: &Engine| {
        rows.iter()
            .find(|r| r.engine == *e)
            .and_then(|r| r.best.as_ref())
            .map(|b| b.median)
    };
    let ratio = |other: &Engine| match (median(&Engine::Native), median(other)) {
        (Some(n), Some(o)) if o > 0.0 => show_ratio(n / o),
        _ => "—".into(),
    };
    s += &format!(
        "\n  native ÷ pytorch: {}    native ÷ spdl: {}    (of the best medians)\n",
        ratio(&Engine::Pytorch),
        ratio(&Engine::Spdl)
    );
    s += "  RSS is the process that ran the loop (runner or Python harness); worker processes'\n  \
          own memory is not in it, so PyTorch's and native process workers' memory is missing.";
    s
}

/// What the bench reads from one `stallscope bare-images` run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bare {
    pub(crate) experiment: String,
    /// The decoder and how it scales (`source.describe()` of the runner).
    pub(crate) pipeline: String,
    pub(crate) images: u64,
    /// images/s of the passes without the stage clocks, in pass order.
    pub(crate) untimed: Vec<f64>,
    /// images/s of the passes with the loader's stage clocks, in pass order.
    pub(crate) timed: Vec<f64>,
}

/// Parses `bare-images`' JSON; an error names the key that is missing or wrong. Returns the
/// parsed JSON too, to keep as it came.
pub(crate) fn parse_bare(text: &str) -> Result<(Bare, Value)> {
    let v: Value = serde_json::from_str(text).context("not JSON")?;
    ensure!(v.is_object(), "not a JSON object");
    let string = |key: &str| -> Result<String> {
        match v.get(key) {
            None => bail!("`{key}` is missing"),
            Some(s) => Ok(s
                .as_str()
                .with_context(|| format!("`{key}` is not a string: {s}"))?
                .to_owned()),
        }
    };
    let rates = |key: &str| -> Result<Vec<f64>> {
        let Some(list) = v.get(key) else {
            bail!("`{key}` is missing");
        };
        let list = list
            .as_array()
            .with_context(|| format!("`{key}` is not a list: {list}"))?;
        ensure!(!list.is_empty(), "`{key}` is empty: no such pass ran");
        list.iter()
            .enumerate()
            .map(|(i, x)| match x.as_f64() {
                Some(r) if r.is_finite() && r > 0.0 => Ok(r),
                _ => bail!("`{key}[{i}]` is not a positive rate: {x}"),
            })
            .collect()
    };
    let images = match v.get("images") {
        None => bail!("`images` is missing"),
        Some(n) => n
            .as_u64()
            .with_context(|| format!("`images` is not a count: {n}"))?,
    };
    ensure!(images > 0, "`images` is 0: the pass read nothing");
    let bare = Bare {
        experiment: string("experiment")?,
        pipeline: string("pipeline")?,
        images,
        untimed: rates("untimed_images_per_s")?,
        timed: rates("timed_images_per_s")?,
    };
    Ok((bare, v))
}

/// The median and range of some passes' rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) n: usize,
}

impl Spread {
    pub(crate) fn of(values: &[f64]) -> Result<Spread> {
        ensure!(!values.is_empty(), "no values");
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Ok(Spread {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    /// (max − min) ÷ median, in percent.
    pub(crate) fn width_percent(&self) -> f64 {
        (self.max - self.min) / self.median * 100.0
    }
}

/// The numbers the goals are judged on, all present.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Goals {
    pub(crate) cores: usize,
    pub(crate) pipeline: String,
    /// The untimed passes of both bare runs: the single-thread rate is their median.
    pub(crate) untimed: Spread,
    /// The timed passes of both bare runs.
    pub(crate) timed: Spread,
    /// Best medians (images/s) of native, pytorch and spdl.
    pub(crate) native: f64,
    pub(crate) pytorch: f64,
    pub(crate) spdl: f64,
    /// Peak host RSS of native's and the DataLoader's best configurations.
    pub(crate) native_rss: u64,
    pub(crate) pytorch_rss: u64,
}

/// The share of the limit native must reach, and the ratio to each peer.
const SHARE_GOAL: f64 = 0.90;
const RATIO_GOAL: f64 = 2.0;
/// The stage clocks' overhead must stay under this, in percent.
const OVERHEAD_GOAL: f64 = 1.0;

impl Goals {
    /// cores × the single-thread bare rate.
    pub(crate) fn limit(&self) -> f64 {
        self.cores as f64 * self.untimed.median
    }

    /// Native's best as a share (0–1) of the limit.
    pub(crate) fn share(&self) -> f64 {
        self.native / self.limit()
    }

    /// (untimed rate ÷ timed rate − 1) × 100, of the medians.
    pub(crate) fn overhead_percent(&self) -> f64 {
        (self.untimed.median / self.timed.median - 1.0) * 100.0
    }
}

/// The goals' numbers from the table's rows and the bare runs before and after the suite;
/// fails naming the first number that is missing.
pub(crate) fn goals(rows: &[Best], before: &Bare, after: &Bare, cores: usize) -> Result<Goals> {
    ensure!(cores > 0, "0 cores");
    ensure!(
        before.pipeline == after.pipeline && before.experiment == after.experiment,
        "the bare runs before and after the suite measured different things:\n  {} {}\n  {} {}",
        before.experiment,
        before.pipeline,
        after.experiment,
        after.pipeline
    );
    let best = |e: Engine| -> Result<&BestConfig> {
        rows.iter()
            .find(|r| r.engine == e)
            .and_then(|r| r.best.as_ref())
            .with_context(|| {
                format!(
                    "{} has no configuration with a whole-run steady images/s",
                    e.as_str()
                )
            })
    };
    let rss = |b: &BestConfig, e: Engine| -> Result<u64> {
        b.peak_rss.with_context(|| {
            format!(
                "{}'s best configuration ({}) has no host_peak_rss_bytes",
                e.as_str(),
                b.label
            )
        })
    };
    let (native, pytorch, spdl) = (
        best(Engine::Native)?,
        best(Engine::Pytorch)?,
        best(Engine::Spdl)?,
    );
    let both = |f: fn(&Bare) -> &Vec<f64>| [f(before).as_slice(), f(after)].concat();
    Ok(Goals {
        cores,
        pipeline: before.pipeline.clone(),
        untimed: Spread::of(&both(|b| &b.untimed)).context("untimed bare passes")?,
        timed: Spread::of(&both(|b| &b.timed)).context("timed bare passes")?,
        native: native.median,
        pytorch: pytorch.median,
        spdl: spdl.median,
        native_rss: rss(native, Engine::Native)?,
        pytorch_rss: rss(pytorch, Engine::Pytorch)?,
    })
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

/// One goal line: what was measured, then the goal and whether it is met, in a column.
fn goal_line(measured: &str, goal: &str, met: bool) -> String {
    format!("  {measured:<62} goal {goal}: {}\n", verdict(met))
}

/// Words of `text` in lines of at most `width` columns, each after `indent`.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out += &format!("{indent}{line}\n");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line += word;
    }
    if !line.is_empty() {
        out += &format!("{indent}{line}\n");
    }
    out
}

/// The limit, the goals each marked met or NOT met, and the timer overhead (under 100 columns).
pub(crate) fn render_goals(g: &Goals) -> String {
    let u = &g.untimed;
    let t = &g.timed;
    let mut s = format!(
        "goals, this run on {} cores (a missed goal is reported, not an error):\n\n  \
         bare per-image function (read, decode, resize, crop, normalise), 1 thread, no loader:\n",
        g.cores
    );
    s += &wrap(&g.pipeline, "    ", 90);
    s += &format!(
        "    {} images/s: median of {} untimed passes before and after the suite, [{}–{}]\n",
        rate(u.median),
        u.n,
        rate(u.min),
        rate(u.max)
    );
    s += &format!(
        "  limit = {} cores × {} = {} images/s\n\n",
        g.cores,
        rate(u.median),
        rate(g.limit())
    );
    s += &goal_line(
        &format!(
            "native = {:.1}% of the limit ({} of {} images/s)",
            g.share() * 100.0,
            rate(g.native),
            rate(g.limit())
        ),
        &format!(">= {:.0}%", SHARE_GOAL * 100.0),
        g.share() >= SHARE_GOAL,
    );
    for (peer, other) in [("pytorch", g.pytorch), ("spdl", g.spdl)] {
        let r = g.native / other;
        s += &goal_line(
            &format!(
                "native ÷ {peer} = {} ({} vs {} images/s)",
                show_ratio(r),
                rate(g.native),
                rate(other)
            ),
            &format!(">= {}", show_ratio(RATIO_GOAL)),
            r >= RATIO_GOAL,
        );
    }
    s += &goal_line(
        &format!(
            "native peak RSS {} vs the DataLoader's {}",
            show_bytes(g.native_rss as f64),
            show_bytes(g.pytorch_rss as f64)
        ),
        "<= DataLoader's",
        g.native_rss <= g.pytorch_rss,
    );
    let o = g.overhead_percent();
    s += &goal_line(
        &format!(
            "timer overhead = {o:+.2}% (untimed {}, timed {} images/s)",
            rate1(u.median),
            rate1(t.median)
        ),
        &format!("< {OVERHEAD_GOAL:.0}%"),
        o < OVERHEAD_GOAL,
    );
    let resolution = u.width_percent().max(t.width_percent());
    s += &format!(
        "    medians of all bare passes. Pass-to-pass spread, (max − min) ÷ median: \
         untimed {:.1}%\n",
        u.width_percent()
    );
    s += &format!(
        "    [{}–{}] n={}, timed {:.1}% [{}–{}] n={}. On {} shared cores that spread bounds \
         what this\n    run resolves: ",
        rate(u.min),
        rate(u.max),
        u.n,
        t.width_percent(),
        rate(t.min),
        rate(t.max),
        t.n,
        g.cores
    );
    s += &if o.abs() <= resolution {
        format!("an overhead under about {resolution:.1}% is not told apart from none.")
    } else {
        format!("{o:+.2}% is larger than it, so it is resolved.")
    };
    s
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> Bundle {
        let path = crate::repo_root().join("fixtures/published/spdl-paper.json");
        read_bundle(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn the_best_of_each_engine_is_its_highest_median() {
        // The published bundle has only cold runs: no steady figure for any engine.
        let rows = best_per_engine(&bundle()).unwrap();
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| r.best.is_none()));
        let mut b = bundle();
        for c in &mut b.experiments[0].configurations {
            for r in &mut c.runs {
                r.phase = Phase::Steady;
            }
        }
        let rows = best_per_engine(&b).unwrap();
        assert!(rows[0].best.is_none(), "no native configuration");
        assert_eq!(rows[1].best.as_ref().unwrap().median, 446.48);
        assert_eq!(rows[2].best.as_ref().unwrap().median, 1763.82);
        let text = render(&rows);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(text.contains("native ÷ pytorch: —"), "{text}");
    }

    /// The pipeline text of a real `bare-images` run.
    const PIPELINE: &str = "decoder libjpeg-turbo (libturbojpeg.so.0), scaled DCT decode (m/8, \
        at most 1/2) where the resize allows (the first image: 500×375 decoded at 1/1, \
        500×375); only the cropped region is resized";

    /// What `stallscope bare-images --passes 2` printed (a real run; `source` shortened).
    fn bare_text() -> String {
        r#"{
          "experiment": "loader_peers",
          "images": 1200,
          "passes": [
            {"images": 1200, "images_per_s": 360.5468060431934, "seconds": 3.328277993,
             "timed": false},
            {"images": 1200, "images_per_s": 381.4904809055078, "seconds": 3.145556862,
             "timed": true}
          ],
          "pipeline": PIPELINE,
          "source": "generated JPEG set: 1200 images of 500×375",
          "timed_images_per_s": [381.4904809055078],
          "untimed_images_per_s": [360.5468060431934]
        }"#
        .replace("PIPELINE", &serde_json::to_string(PIPELINE).unwrap())
    }

    fn bare(untimed: &[f64], timed: &[f64]) -> Bare {
        Bare {
            experiment: "loader_peers".into(),
            pipeline: PIPELINE.into(),
            images: 1200,
            untimed: untimed.to_vec(),
            timed: timed.to_vec(),
        }
    }

    fn row(engine: Engine, median: f64, peak_rss: Option<u64>) -> Best {
        Best {
            best: Some(BestConfig {
                label: format!("{} workers=2", engine.as_str()),
                median,
                min: median * 0.98,
                max: median * 1.01,
                runs: 3,
                peak_rss,
            }),
            engine,
        }
    }

    const MIB: u64 = 1024 * 1024;

    fn rows(native: f64, pytorch: f64, spdl: f64, native_rss: u64) -> Vec<Best> {
        vec![
            row(Engine::Native, native, Some(native_rss * MIB)),
            row(Engine::Pytorch, pytorch, Some(400 * MIB)),
            row(Engine::Spdl, spdl, Some(300 * MIB)),
        ]
    }

    fn before() -> Bare {
        bare(&[360.0, 364.0], &[359.0, 361.0])
    }

    fn after() -> Bare {
        bare(&[356.0, 362.0], &[358.0, 360.0])
    }

    fn assert_narrow(text: &str) {
        for l in text.lines() {
            assert!(
                l.chars().count() < 100,
                "{} columns: {l}",
                l.chars().count()
            );
        }
    }

    #[test]
    fn bare_images_json_parses() {
        let (b, v) = parse_bare(&bare_text()).unwrap();
        assert_eq!(b.experiment, "loader_peers");
        assert_eq!(b.images, 1200);
        assert_eq!(b.untimed, [360.5468060431934]);
        assert_eq!(b.timed, [381.4904809055078]);
        assert_eq!(b.pipeline, PIPELINE);
        assert_eq!(v["passes"].as_array().unwrap().len(), 2, "kept as it came");
    }

    #[test]
    fn missing_or_garbled_bare_json_is_an_error_naming_what() {
        let err = |text: &str| format!("{:#}", parse_bare(text).unwrap_err());
        assert!(err("{\"experiment\": ").contains("not JSON"));
        assert!(err("[1, 2]").contains("not a JSON object"));
        let mut v: Value = serde_json::from_str(&bare_text()).unwrap();
        for key in ["experiment", "pipeline", "images", "untimed_images_per_s"] {
            let mut w = v.clone();
            w.as_object_mut().unwrap().remove(key);
            let e = err(&w.to_string());
            assert!(e.contains(&format!("`{key}` is missing")), "{key}: {e}");
        }
        v["timed_images_per_s"] = serde_json::json!([]);
        assert!(err(&v.to_string()).contains("`timed_images_per_s` is empty"));
        v["timed_images_per_s"] = serde_json::json!([380.0, "fast"]);
        let e = err(&v.to_string());
        assert!(
            e.contains("`timed_images_per_s[1]` is not a positive rate"),
            "{e}"
        );
        v["timed_images_per_s"] = serde_json::json!([0.0]);
        assert!(err(&v.to_string()).contains("`timed_images_per_s[0]`"));
        v["timed_images_per_s"] = serde_json::json!("380");
        assert!(err(&v.to_string()).contains("`timed_images_per_s` is not a list"));
        v["images"] = serde_json::json!(-1);
        assert!(err(&v.to_string()).contains("`images` is not a count"));
    }

    #[test]
    fn spread_is_median_and_range() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        let s = Spread::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert_eq!(s.width_percent(), 120.0);
        assert!(Spread::of(&[]).is_err());
    }

    #[test]
    fn the_limit_is_cores_times_the_median_untimed_pass_of_both_runs() {
        let g = goals(&rows(660.0, 300.0, 320.0, 200), &before(), &after(), 2).unwrap();
        // Untimed passes 356, 360, 362, 364: median 361.
        assert_eq!(g.untimed.median, 361.0);
        assert_eq!(
            (g.untimed.min, g.untimed.max, g.untimed.n),
            (356.0, 364.0, 4)
        );
        assert_eq!(g.limit(), 722.0);
        assert!((g.share() - 660.0 / 722.0).abs() < 1e-12);
        // Timed 358, 359, 360, 361: median 359.5.
        assert!((g.overhead_percent() - (361.0 / 359.5 - 1.0) * 100.0).abs() < 1e-12);
        assert_eq!(g.native_rss, 200 * MIB);
        assert_eq!(g.pytorch_rss, 400 * MIB);
    }

    #[test]
    fn a_missing_number_is_an_error_naming_it() {
        let err =
            |rows: &[Best], b: &Bare| format!("{:#}", goals(rows, b, &after(), 2).unwrap_err());
        let mut r = rows(660.0, 300.0, 320.0, 200);
        r[2].best = None;
        assert!(err(&r, &before()).contains("spdl has no configuration"));
        let mut r = rows(660.0, 300.0, 320.0, 200);
        r[0].best.as_mut().unwrap().peak_rss = None;
        let e = err(&r, &before());
        assert!(
            e.contains("native's best configuration") && e.contains("host_peak_rss"),
            "{e}"
        );
        let mut other = before();
        other.pipeline = "decoder zune-jpeg".into();
        let e = err(&rows(660.0, 300.0, 320.0, 200), &other);
        assert!(e.contains("measured different things"), "{e}");
    }

    #[test]
    fn goals_met_read_met() {
        let g = goals(&rows(660.0, 300.0, 320.0, 200), &before(), &after(), 2).unwrap();
        let text = render_goals(&g);
        eprintln!("{text}");
        assert_narrow(&text);
        assert!(!text.contains("NOT met"), "{text}");
        assert_eq!(text.matches(": met").count(), 5, "{text}");
        assert!(
            text.contains("limit = 2 cores × 361 = 722 images/s"),
            "{text}"
        );
        assert!(
            text.contains("native = 91.4% of the limit (660 of 722 images/s)"),
            "{text}"
        );
        assert!(text.contains("goal >= 90%: met"), "{text}");
        assert!(text.contains("native ÷ pytorch = 2.20×"), "{text}");
        assert!(
            text.contains("timer overhead = +0.42% (untimed 361.0, timed 359.5 images/s)"),
            "{text}"
        );
        assert!(text.contains("untimed 2.2%"), "the spread: {text}");
        assert!(text.contains("not told apart from none"), "{text}");
    }

    #[test]
    fn goals_missed_read_not_met() {
        // 640 of 722 is 88.6%; 640 ÷ 330 < 2; RSS above the DataLoader's; timed 3% slower.
        let after = bare(&[356.0, 362.0], &[350.0, 351.0]);
        let before = bare(&[360.0, 364.0], &[350.0, 351.0]);
        let g = goals(&rows(640.0, 300.0, 330.0, 500), &before, &after, 2).unwrap();
        let text = render_goals(&g);
        eprintln!("{text}");
        assert_narrow(&text);
        let line = |start: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(start))
                .unwrap_or_else(|| panic!("no line {start:?}: {text}"))
                .to_owned()
        };
        assert!(
            line("native = 88.6%").ends_with("goal >= 90%: NOT met"),
            "{text}"
        );
        assert!(line("native ÷ pytorch").ends_with(": met"), "{text}");
        assert!(
            line("native ÷ spdl").ends_with("goal >= 2.00×: NOT met"),
            "{text}"
        );
        assert!(
            line("native peak RSS").ends_with("goal <= DataLoader's: NOT met"),
            "{text}"
        );
        assert!(
            line("timer overhead").ends_with("goal < 1%: NOT met"),
            "{text}"
        );
        assert!(text.contains("so it is resolved"), "{text}");
    }
}
