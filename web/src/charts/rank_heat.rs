//! The rank × step heat map of a merged bundle: one row per rank, one column
//! per step (or per bin of steps when there are more steps than pixels,
//! each bin showing its largest value), coloured by the time a stage took
//! in that step, from each rank's diagnostic run. Drawn as one `ImageData`
//! straight onto the canvas (no plotters: a thousand ranks × a few hundred
//! steps is a few hundred thousand cells), labels with the 2D context.
//!
//! The binning is display only: no number shown is computed here except the
//! colour scale's end, the largest per-step value drawn.

use stallscope_bundle::analysis::{Quantity, Unit};
use stallscope_bundle::{Configuration, Experiment, Phase, Run, StepSeries, TimingMode};
use wasm_bindgen::{Clamped, JsCast};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData};

use super::ChartResult;

/// The per-step column a heat map shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Comm,
    NextWait,
    Compute,
}

impl Stage {
    pub const ALL: [Stage; 3] = [Stage::Comm, Stage::NextWait, Stage::Compute];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Comm => "comm",
            Stage::NextWait => "next-wait",
            Stage::Compute => "compute",
        }
    }

    pub fn from_str(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|k| k.as_str() == s)
    }

    fn column(self, s: &StepSeries) -> &[u64] {
        match self {
            Stage::Comm => &s.comm_ns,
            Stage::NextWait => &s.next_wait_ns,
            Stage::Compute => &s.compute_ns,
        }
    }
}

/// One diagnostic run with per-step records per rank, ascending by rank
/// (a steady epoch when the rank has one).
pub fn rank_runs(c: &Configuration) -> Vec<(u32, &Run)> {
    let mut out: Vec<(u32, &Run)> = Vec::new();
    for r in &c.runs {
        let (Some(rank), Some(_)) = (r.rank, r.steps.as_ref()) else {
            continue;
        };
        if r.timing_mode != TimingMode::Diagnostic {
            continue;
        }
        match out.iter_mut().find(|(k, _)| *k == rank) {
            Some(slot) => {
                if slot.1.phase != Phase::Steady && r.phase == Phase::Steady {
                    slot.1 = r;
                }
            }
            None => out.push((rank, r)),
        }
    }
    out.sort_by_key(|(k, _)| *k);
    out
}

/// Configurations with per-rank per-step records.
pub fn configurations_with_ranks(e: &Experiment) -> Vec<&Configuration> {
    e.configurations
        .iter()
        .filter(|c| !rank_runs(c).is_empty())
        .collect()
}

/// The stages that have values in this configuration, comm first.
pub fn stages_of(c: &Configuration) -> Vec<Stage> {
    let runs = rank_runs(c);
    Stage::ALL
        .into_iter()
        .filter(|s| {
            runs.iter()
                .any(|(_, r)| r.steps.as_ref().is_some_and(|x| !s.column(x).is_empty()))
        })
        .collect()
}

/// Rows of `bins` cells, each the largest value of its steps (ns).
fn grid(runs: &[(u32, &Run)], stage: Stage, bins: usize) -> (Vec<u64>, usize, u64) {
    let steps = runs
        .iter()
        .filter_map(|(_, r)| r.steps.as_ref().map(|s| stage.column(s).len()))
        .max()
        .unwrap_or(0);
    let bins = bins.clamp(1, steps.max(1));
    let mut cells = vec![0u64; runs.len() * bins];
    let mut top = 0u64;
    for (row, (_, r)) in runs.iter().enumerate() {
        let Some(s) = &r.steps else { continue };
        for (i, v) in stage.column(s).iter().enumerate() {
            let cell = &mut cells[row * bins + i * bins / steps];
            *cell = (*cell).max(*v);
            top = top.max(*v);
        }
    }
    (cells, bins, top)
}

/// White → red → dark red.
fn colour(share: f64) -> [u8; 3] {
    let s = share.clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64, t: f64| (a + (b - a) * t).round() as u8;
    if s < 0.6 {
        let t = s / 0.6;
        [
            lerp(255.0, 214.0, t),
            lerp(255.0, 60.0, t),
            lerp(255.0, 50.0, t),
        ]
    } else {
        let t = (s - 0.6) / 0.4;
        [
            lerp(214.0, 90.0, t),
            lerp(60.0, 0.0, t),
            lerp(50.0, 10.0, t),
        ]
    }
}

pub fn draw(canvas: &HtmlCanvasElement, c: &Configuration, stage: Stage) -> ChartResult {
    let runs = rank_runs(c);
    if runs.is_empty() {
        return Err("no rank has per-step records in this configuration".into());
    }
    let dpr = web_sys::window()
        .map(|w| w.device_pixel_ratio())
        .unwrap_or(1.0)
        .max(1.0);
    let (left, right, top_m, bottom) = (56.0, 110.0, 28.0, 34.0);
    // At least one CSS pixel per rank (up to 1,024 rows), so no rank is skipped.
    let rows = (runs.len() as f64).clamp(240.0, 1024.0);
    let _ = canvas.set_attribute("style", &format!("height:{}px", rows + top_m + bottom));
    let css_w = canvas.client_width().max(320) as f64;
    let css_h = canvas.client_height().max(200) as f64;
    canvas.set_width((css_w * dpr).round() as u32);
    canvas.set_height((css_h * dpr).round() as u32);
    let ctx: CanvasRenderingContext2d = canvas
        .get_context("2d")
        .ok()
        .flatten()
        .and_then(|c| c.dyn_into().ok())
        .ok_or("the browser gave no 2D context for the chart")?;
    let pw = ((css_w - left - right) * dpr).max(1.0) as usize;
    let ph = ((css_h - top_m - bottom) * dpr).max(1.0) as usize;
    let (cells, bins, top) = grid(&runs, stage, pw);
    let n = runs.len();
    let mut rgba = vec![255u8; pw * ph * 4];
    for y in 0..ph {
        let row = y * n / ph;
        for x in 0..pw {
            let v = cells[row * bins + x * bins / pw];
            let share = if top == 0 { 0.0 } else { v as f64 / top as f64 };
            let [r, g, b] = colour(share);
            let i = (y * pw + x) * 4;
            rgba[i] = r;
            rgba[i + 1] = g;
            rgba[i + 2] = b;
        }
    }
    ctx.set_fill_style_str("#ffffff");
    ctx.fill_rect(0.0, 0.0, css_w * dpr, css_h * dpr);
    let image = ImageData::new_with_u8_clamped_array_and_sh(Clamped(&rgba), pw as u32, ph as u32)
        .map_err(|_| "the browser refused the heat map's pixels".to_string())?;
    ctx.put_image_data(&image, left * dpr, top_m * dpr)
        .map_err(|_| "the browser refused the heat map's pixels".to_string())?;
    let steps = runs
        .iter()
        .filter_map(|(_, r)| r.steps.as_ref().map(|s| stage.column(s).len()))
        .max()
        .unwrap_or(0);
    labels(
        &ctx,
        dpr,
        css_w,
        css_h,
        (left, right, top_m, bottom),
        &runs,
        steps,
        stage,
        top,
    );
    // Colour scale.
    let (sx, sy, sh) = (css_w - right + 16.0, top_m, css_h - top_m - bottom);
    for k in 0..=100 {
        let [r, g, b] = colour(1.0 - k as f64 / 100.0);
        ctx.set_fill_style_str(&format!("rgb({r},{g},{b})"));
        ctx.fill_rect(
            sx * dpr,
            (sy + sh * k as f64 / 101.0) * dpr,
            14.0 * dpr,
            sh / 100.0 * dpr + 1.0,
        );
    }
    let unit = Unit::for_values(Quantity::Duration, &[top as f64 * 1e-9]);
    ctx.set_fill_style_str("#1d2329");
    let _ = ctx.fill_text(
        &unit.show(top as f64 * 1e-9),
        (sx + 18.0) * dpr,
        (sy + 10.0) * dpr,
    );
    let _ = ctx.fill_text(&unit.show(0.0), (sx + 18.0) * dpr, (sy + sh) * dpr);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn labels(
    ctx: &CanvasRenderingContext2d,
    dpr: f64,
    css_w: f64,
    css_h: f64,
    (left, right, top_m, bottom): (f64, f64, f64, f64),
    runs: &[(u32, &Run)],
    steps: usize,
    stage: Stage,
    top: u64,
) {
    ctx.set_fill_style_str("#1d2329");
    ctx.set_font(&format!("{}px sans-serif", 13.0 * dpr));
    let _ = ctx.fill_text(
        &format!(
            "{} time per step, rank × step — diagnostic — synchronized at every stage{}",
            stage.as_str(),
            if top == 0 { " (all zero)" } else { "" }
        ),
        left * dpr,
        18.0 * dpr,
    );
    ctx.set_font(&format!("{}px sans-serif", 11.0 * dpr));
    let (pw, ph) = (css_w - left - right, css_h - top_m - bottom);
    let n = runs.len();
    // Up to eight rank labels at the rows they name.
    let every = n.div_ceil(8).max(1);
    for (row, (rank, _)) in runs.iter().enumerate().step_by(every) {
        let y = top_m + (row as f64 + 0.5) * ph / n as f64;
        let _ = ctx.fill_text(&format!("{rank}"), 6.0 * dpr, (y + 4.0) * dpr);
    }
    let _ = ctx.fill_text("rank", 6.0 * dpr, (top_m - 2.0) * dpr);
    for k in 0..=4 {
        let step = steps.saturating_sub(1) * k / 4;
        let x = left + pw * step as f64 / steps.max(1) as f64;
        let _ = ctx.fill_text(&format!("{step}"), x * dpr, (css_h - bottom + 14.0) * dpr);
    }
    let _ = ctx.fill_text(
        "step (bins of steps show their largest value)",
        (left + pw / 2.0 - 110.0) * dpr,
        (css_h - 6.0) * dpr,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::charts::test_gen::Gen;

    fn diagnostic(rank: u32, phase: Phase, comm: Vec<u64>) -> Run {
        let id = format!("rank{rank}-{}", phase.as_str());
        Run {
            steps: Some(StepSeries {
                next_wait_ns: vec![1; comm.len()],
                transfer_ns: vec![1; comm.len()],
                compute_ns: vec![1; comm.len()],
                comm_ns: comm,
            }),
            rank: Some(rank),
            ..Run::new(id, TimingMode::Diagnostic, 0, 0, phase)
        }
    }

    /// Over generated configurations: one run per rank, ascending, the
    /// steady one when there is one; the grid keeps every row's largest
    /// value and the overall largest, has no more bins than pixels or
    /// steps, and every cell is zero or one of its row's values.
    #[test]
    fn heat_map_grid_keeps_every_rows_peak() {
        let mut g = Gen(0x5EED_1234_ABCD_0001);
        for _ in 0..200 {
            let ranks = 1 + g.next(40) as u32;
            let mut runs = Vec::new();
            for r in 0..ranks {
                let steps = 1 + g.next(300) as usize;
                let comm: Vec<u64> = (0..steps).map(|_| g.next(1_000_000)).collect();
                runs.push(diagnostic(r, Phase::Cold, comm.clone()));
                if g.next(2) == 0 {
                    runs.push(diagnostic(r, Phase::Steady, comm));
                }
            }
            // Bundle order need not be rank order.
            for i in (1..runs.len()).rev() {
                runs.swap(i, g.next(i as u64 + 1) as usize);
            }
            let c = Configuration::new("c", "c").with_runs(runs.clone());
            let picked = rank_runs(&c);
            let order: Vec<u32> = picked.iter().map(|(r, _)| *r).collect();
            assert_eq!(order, (0..ranks).collect::<Vec<_>>());
            for (r, run) in &picked {
                let steady = runs
                    .iter()
                    .any(|x| x.rank == Some(*r) && x.phase == Phase::Steady);
                assert_eq!(run.phase == Phase::Steady, steady, "rank {r}");
            }
            let pixels = 1 + g.next(600) as usize;
            let (cells, bins, top) = grid(&picked, Stage::Comm, pixels);
            let most_steps = picked
                .iter()
                .map(|(_, r)| r.steps.as_ref().unwrap().comm_ns.len())
                .max()
                .unwrap();
            assert!(bins <= pixels.max(1) && bins <= most_steps, "{bins} bins");
            assert_eq!(cells.len(), picked.len() * bins);
            let mut overall = 0;
            for (row, (_, run)) in picked.iter().enumerate() {
                let values = &run.steps.as_ref().unwrap().comm_ns;
                let peak = *values.iter().max().unwrap();
                overall = overall.max(peak);
                let cells = &cells[row * bins..(row + 1) * bins];
                assert_eq!(*cells.iter().max().unwrap(), peak, "row {row}");
                assert!(cells.iter().all(|c| *c == 0 || values.contains(c)));
            }
            assert_eq!(top, overall);
        }
    }

    #[test]
    fn colour_runs_from_white_to_dark() {
        assert_eq!(colour(0.0), [255, 255, 255]);
        assert_eq!(colour(1.0), [90, 0, 10]);
        let mut last = 255 * 3 + 1;
        for k in 0..=100 {
            let [r, g, b] = colour(k as f64 / 100.0);
            let sum = r as u32 + g as u32 + b as u32;
            assert!(sum < last, "colour({k}%) is not darker than the one before");
            last = sum;
        }
    }
}
