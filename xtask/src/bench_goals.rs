//! The goals of `cargo xtask bench loader-peers`: `stallscope bare-images`' JSON (the bare
//! per-image function on one thread, before and after the suite), the limit (cores × its
//! median untimed rate), native's share of it, its ratio to each peer (DataLoader, SPDL, DALI,
//! nodes) and the goal on the best of them, peak RSS, and the stage
//! clocks' overhead (the median of each pass's paired untimed ÷ timed rates: the two modes
//! alternate image by image). Each goal is reported as met or NOT met.
use crate::bench_best::{Best, BestConfig, ENGINES, rate, rate1};
use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use stallscope_bundle::Engine;
use stallscope_bundle::analysis::{show_bytes, show_ratio};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bare {
    pub(crate) experiment: String,
    /// The decoder and how it scales (`source.describe()` of the runner).
    pub(crate) pipeline: String,
    pub(crate) images: u64,
    /// Per pass, images/s of its images loaded without the stage clocks.
    pub(crate) untimed: Vec<f64>,
    /// Per pass (paired with `untimed`), images/s of its images loaded with the clocks.
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
    ensure!(
        bare.untimed.len() == bare.timed.len(),
        "`untimed_images_per_s` has {} passes, `timed_images_per_s` {}: expected one pair per pass",
        bare.untimed.len(),
        bare.timed.len()
    );
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
    /// The timed halves of the passes of both bare runs.
    pub(crate) timed: Spread,
    /// Per pass, (untimed ÷ timed − 1) × 100: the clocks' overhead, paired within a pass.
    pub(crate) overhead: Spread,
    /// Native's best median, images/s.
    pub(crate) native: f64,
    /// Each peer's best median (images/s), in `ENGINES`' order: pytorch, spdl, dali, nodes.
    pub(crate) peers: Vec<(Engine, f64)>,
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

    /// The fastest peer and its best median.
    pub(crate) fn best_peer(&self) -> (Engine, f64) {
        self.peers
            .iter()
            .cloned()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .expect("goals() holds every peer")
    }

    /// The median over passes of (untimed ÷ timed − 1) × 100.
    pub(crate) fn overhead_percent(&self) -> f64 {
        self.overhead.median
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
    let rss = |b: &BestConfig, e: Engine| -> Result<u64> {
        b.peak_rss.with_context(|| {
            format!(
                "{}'s best configuration ({}) has no host_peak_rss_bytes",
                e.as_str(),
                b.label
            )
        })
    };
    let native = best_of(rows, Engine::Native)?;
    let pytorch = best_of(rows, Engine::Pytorch)?;
    let peers = ENGINES[1..]
        .iter()
        .map(|e| Ok((e.clone(), best_of(rows, e.clone())?.median)))
        .collect::<Result<Vec<_>>>()?;
    let both = |f: fn(&Bare) -> &Vec<f64>| [f(before).as_slice(), f(after)].concat();
    let paired: Vec<f64> = [before, after]
        .iter()
        .flat_map(|b| {
            b.untimed
                .iter()
                .zip(&b.timed)
                .map(|(u, t)| (u / t - 1.0) * 100.0)
        })
        .collect();
    Ok(Goals {
        cores,
        pipeline: before.pipeline.clone(),
        untimed: Spread::of(&both(|b| &b.untimed)).context("untimed bare passes")?,
        timed: Spread::of(&both(|b| &b.timed)).context("timed bare passes")?,
        overhead: Spread::of(&paired).context("paired bare passes")?,
        native: native.median,
        peers,
        native_rss: rss(native, Engine::Native)?,
        pytorch_rss: rss(pytorch, Engine::Pytorch)?,
    })
}

/// An engine's best configuration from the table's rows; an error names the engine without one.
fn best_of(rows: &[Best], e: Engine) -> Result<&BestConfig> {
    rows.iter()
        .find(|r| r.engine == e)
        .and_then(|r| r.best.as_ref())
        .with_context(|| {
            format!(
                "{} has no configuration with a whole-run steady images/s",
                e.as_str()
            )
        })
}

pub(crate) fn verdict(met: bool) -> &'static str {
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

/// The limit, the goals each marked met or NOT met, and the clocks' overhead (under 100 columns).
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
    let (peer, other) = g.best_peer();
    let r = g.native / other;
    s += &goal_line(
        &format!(
            "native ÷ the best peer ({}) = {} ({} vs {} images/s)",
            peer.as_str(),
            show_ratio(r),
            rate(g.native),
            rate(other)
        ),
        &format!(">= {}", show_ratio(RATIO_GOAL)),
        r >= RATIO_GOAL,
    );
    let each: Vec<String> = g
        .peers
        .iter()
        .map(|(e, o)| format!("{} {}", e.as_str(), show_ratio(g.native / o)))
        .collect();
    s += &format!("    native ÷ each peer: {}\n", each.join(", "));
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
    let p = &g.overhead;
    s += &goal_line(
        &format!(
            "stage clocks' cost = {o:+.2}% ({} vs {} images/s)",
            rate1(u.median),
            rate1(t.median)
        ),
        &format!("< {OVERHEAD_GOAL:.0}%"),
        o < OVERHEAD_GOAL,
    );
    let agree = if p.min <= 0.0 && p.max >= 0.0 {
        "The passes disagree in sign: the cost is not told apart from none."
    } else {
        "Every pass agrees in sign."
    };
    s += &wrap(
        &format!(
            "Median of {} passes, each pairing the images it loaded without and with the clocks \
             (alternating image by image); per pass {:+.2}% to {:+.2}%. {agree} The untimed \
             rates' spread, (max − min) ÷ median, is {:.1}% [{}–{}] on {} shared cores.",
            p.n,
            p.min,
            p.max,
            u.width_percent(),
            rate(u.min),
            rate(u.max),
            g.cores
        ),
        "    ",
        90,
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
            {"images": 1200, "seconds": 2.199064038, "timed_images": 600,
             "timed_seconds": 1.097561103, "untimed_images": 600, "untimed_seconds": 1.101403961},
            {"images": 1200, "seconds": 1.958303694, "timed_images": 600,
             "timed_seconds": 0.982367346, "untimed_images": 600, "untimed_seconds": 0.975832164}
          ],
          "pipeline": PIPELINE,
          "source": "generated JPEG set: 1200 images of 500×3",
          "timed_images_per_s": [546.6666032168962, 610.7694870387111],
          "untimed_images_per_s": [544.7592538665294, 614.8598315724302]
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

    /// Native's row, then the DataLoader's, SPDL's, DALI's (280) and nodes' (250).
    fn rows(native: f64, pytorch: f64, spdl: f64, native_rss: u64) -> Vec<Best> {
        vec![
            row(Engine::Native, native, Some(native_rss * MIB)),
            row(Engine::Pytorch, pytorch, Some(400 * MIB)),
            row(Engine::Spdl, spdl, Some(300 * MIB)),
            row(Engine::Dali, 280.0, Some(350 * MIB)),
            row(Engine::Nodes, 250.0, None),
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
        assert_eq!(b.untimed, [544.7592538665294, 614.8598315724302]);
        assert_eq!(b.timed, [546.6666032168962, 610.7694870387111]);
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
        v["timed_images_per_s"] = serde_json::json!([500.0]);
        let e = err(&v.to_string());
        assert!(
            e.contains("`untimed_images_per_s` has 2 passes, `timed_images_per_s` 1"),
            "{e}"
        );
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
        // Paired per pass: 360/359, 364/361, 356/358, 362/360; the median of the four
        // percentages is the mean of the middle two.
        let pct = |u: f64, t: f64| (u / t - 1.0) * 100.0;
        let want = (pct(360.0, 359.0) + pct(362.0, 360.0)) / 2.0;
        assert!(
            (g.overhead_percent() - want).abs() < 1e-12,
            "{}",
            g.overhead_percent()
        );
        assert_eq!(g.overhead.min, pct(356.0, 358.0));
        assert_eq!(g.overhead.max, pct(364.0, 361.0));
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
        r[3].best = None;
        assert!(err(&r, &before()).contains("dali has no configuration"));
        let r = &rows(660.0, 300.0, 320.0, 200)[..4];
        assert!(err(r, &before()).contains("nodes has no configuration"));
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
        assert_eq!(text.matches(": met").count(), 4, "{text}");
        assert!(
            text.contains("limit = 2 cores × 361 = 722 images/s"),
            "{text}"
        );
        assert!(
            text.contains("native = 91.4% of the limit (660 of 722 images/s)"),
            "{text}"
        );
        assert!(text.contains("goal >= 90%: met"), "{text}");
        assert!(
            text.contains("native ÷ the best peer (spdl) = 2.06× (660 vs 320 images/s)"),
            "{text}"
        );
        assert!(
            text.contains("native ÷ each peer: pytorch 2.20×, spdl 2.06×, dali 2.36×, nodes 2.64×"),
            "{text}"
        );
        assert!(
            text.contains("stage clocks' cost = +0.42% (361.0 vs 359.5 images/s)"),
            "{text}"
        );
        assert!(text.contains("per pass -0.56% to +0.83%"), "{text}");
        assert!(text.contains("is 2.2%"), "the spread: {text}");
        assert!(text.contains("not told apart from none"), "{text}");
    }

    #[test]
    fn goals_missed_read_not_met() {
        // 640 of 722 is 88.6%; 640 ÷ 330 (SPDL, the best peer) < 2, though 640 ÷ 300 (the
        // DataLoader) is not; RSS above the DataLoader's; timed 3% slower.
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
        assert!(
            line("native ÷ the best peer (spdl) = 1.94×").ends_with("goal >= 2.00×: NOT met"),
            "{text}"
        );
        assert!(line("native ÷ each peer: pytorch 2.13×").contains("spdl 1.94×"));
        assert!(
            line("native peak RSS").ends_with("goal <= DataLoader's: NOT met"),
            "{text}"
        );
        assert!(
            line("stage clocks' cost").ends_with("goal < 1%: NOT met"),
            "{text}"
        );
        assert!(text.contains("Every pass agrees in sign."), "{text}");
    }
}
