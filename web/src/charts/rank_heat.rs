//! The rank × step heat map of a merged bundle: one row per rank, one column
//! per step, coloured by the time a stage took in that step, from each
//! rank's diagnostic run as the bundle's sidecar file holds it
//! (`stallscope_bundle::sidecar`). With more ranks than pixel rows (16,384
//! ranks on a few hundred) each pixel row shows the largest value of its
//! ranks, and with more steps than pixels each column the largest of its
//! steps, so a slow rank or step is never averaged away. Drawn as one
//! `ImageData` straight onto the canvas, labels with the 2D context.
//!
//! The binning is display only: no number shown is computed here except the
//! colour scale's end, the largest per-step value drawn.

use stallscope_bundle::analysis::{Quantity, Unit};
use stallscope_bundle::sidecar::{RunSteps, StageSteps};
use stallscope_bundle::{Configuration, Experiment, Phase};
use wasm_bindgen::{Clamped, JsCast};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData};

use super::ChartResult;

/// The per-step column a heat map shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Comm,
    NextWait,
    Compute,
    Transfer,
}

impl Stage {
    pub const ALL: [Stage; 4] = [
        Stage::Comm,
        Stage::NextWait,
        Stage::Compute,
        Stage::Transfer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Comm => "comm",
            Stage::NextWait => "next-wait",
            Stage::Compute => "compute",
            Stage::Transfer => "transfer",
        }
    }

    pub fn from_str(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The stage's name in the format (a sidecar's `stage`).
    pub fn format_name(self) -> &'static str {
        match self {
            Stage::Comm => "comm",
            Stage::NextWait => "next_wait",
            Stage::Compute => "compute",
            Stage::Transfer => "transfer",
        }
    }
}

/// Configurations with per-rank columns and sidecars of per-step series.
pub fn configurations_with_ranks(e: &Experiment) -> Vec<&Configuration> {
    e.configurations
        .iter()
        .filter(|c| c.ranks.as_ref().is_some_and(|r| !r.sidecars.is_empty()))
        .collect()
}

/// The stages this configuration's sidecars hold, comm first.
pub fn stages_of(c: &Configuration) -> Vec<Stage> {
    let Some(cols) = &c.ranks else {
        return Vec::new();
    };
    Stage::ALL
        .into_iter()
        .filter(|s| cols.sidecars.iter().any(|f| f.stage == s.format_name()))
        .collect()
}

/// The run a heat map shows: a steady epoch when there is one, the first
/// (repeat, epoch) of its phase.
pub fn pick_run(s: &StageSteps) -> Option<&RunSteps> {
    let first = |phase: Phase| {
        s.runs
            .iter()
            .filter(|r| r.phase == phase)
            .min_by_key(|r| (r.repeat, r.epoch))
    };
    first(Phase::Steady).or_else(|| first(Phase::Cold))
}

/// Ranks in pixel-row buckets × steps in bins, each cell the largest value
/// (ns) of its ranks and steps; `top` the largest of all.
struct Grid {
    cells: Vec<u64>,
    buckets: usize,
    bins: usize,
    top: u64,
}

/// The bucket of rank index `i` of `n` among `buckets`.
fn bucket_of(i: usize, n: usize, buckets: usize) -> usize {
    i * buckets / n.max(1)
}

fn grid(run: &RunSteps, buckets: usize, bins: usize) -> Grid {
    let n = run.ranks.len();
    let steps = run.steps as usize;
    let buckets = buckets.clamp(1, n.max(1));
    let bins = bins.clamp(1, steps.max(1));
    let mut cells = vec![0u64; buckets * bins];
    let mut top = 0u64;
    for i in 0..n {
        let row = &mut cells[bucket_of(i, n, buckets) * bins..][..bins];
        for (j, v) in run.row_ns(i).enumerate() {
            let cell = &mut row[j * bins / steps];
            *cell = (*cell).max(v);
            top = top.max(v);
        }
    }
    Grid {
        cells,
        buckets,
        bins,
        top,
    }
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

fn context(canvas: &HtmlCanvasElement) -> Result<CanvasRenderingContext2d, String> {
    canvas
        .get_context("2d")
        .ok()
        .flatten()
        .and_then(|c| c.dyn_into().ok())
        .ok_or_else(|| "the browser gave no 2D context for the chart".to_string())
}

/// The heat map's pixels: `pw` × `ph`, each pixel row the bucket it falls in.
fn pixels(g: &Grid, pw: usize, ph: usize) -> Vec<u8> {
    let mut rgba = vec![255u8; pw * ph * 4];
    for y in 0..ph {
        let row = &g.cells[(y * g.buckets / ph) * g.bins..][..g.bins];
        for x in 0..pw {
            let v = row[x * g.bins / pw];
            let share = if g.top == 0 {
                0.0
            } else {
                v as f64 / g.top as f64
            };
            let i = (y * pw + x) * 4;
            rgba[i..i + 3].copy_from_slice(&colour(share));
        }
    }
    rgba
}

/// Draw one stage of every rank; `mark`: a rank to point at.
pub fn draw(
    canvas: &HtmlCanvasElement,
    run: &RunSteps,
    stage: Stage,
    mark: Option<u32>,
) -> ChartResult {
    if run.ranks.is_empty() || run.steps == 0 {
        return Err("no rank has per-step records in this configuration".into());
    }
    let dpr = web_sys::window()
        .map(|w| w.device_pixel_ratio())
        .unwrap_or(1.0)
        .max(1.0);
    let (left, right, top_m, bottom) = (56.0, 110.0, 28.0, 34.0);
    // One CSS pixel per rank up to 1,024 ranks; beyond, rows of ranks.
    let rows = (run.ranks.len() as f64).clamp(240.0, 1024.0);
    let _ = canvas.set_attribute("style", &format!("height:{}px", rows + top_m + bottom));
    let css_w = canvas.client_width().max(320) as f64;
    let css_h = canvas.client_height().max(200) as f64;
    canvas.set_width((css_w * dpr).round() as u32);
    canvas.set_height((css_h * dpr).round() as u32);
    let ctx = context(canvas)?;
    let pw = ((css_w - left - right) * dpr).max(1.0) as usize;
    let ph = ((css_h - top_m - bottom) * dpr).max(1.0) as usize;
    let g = grid(run, ph, pw);
    let rgba = pixels(&g, pw, ph);
    ctx.set_fill_style_str("#ffffff");
    ctx.fill_rect(0.0, 0.0, css_w * dpr, css_h * dpr);
    let image = ImageData::new_with_u8_clamped_array_and_sh(Clamped(&rgba), pw as u32, ph as u32)
        .map_err(|_| "the browser refused the heat map's pixels".to_string())?;
    ctx.put_image_data(&image, left * dpr, top_m * dpr)
        .map_err(|_| "the browser refused the heat map's pixels".to_string())?;
    let frame = Frame {
        dpr,
        css_w,
        css_h,
        margins: (left, right, top_m, bottom),
    };
    labels(&ctx, &frame, run, stage, g.top);
    if let Some(i) = mark.and_then(|m| run.ranks.binary_search(&m).ok()) {
        pointer(&ctx, &frame, run, i);
    }
    scale(&ctx, &frame, g.top);
    Ok(())
}

/// The canvas's size and the heat map's margins, CSS px.
struct Frame {
    dpr: f64,
    css_w: f64,
    css_h: f64,
    margins: (f64, f64, f64, f64),
}

/// A marker at rank index `i`'s row, in the left margin.
fn pointer(ctx: &CanvasRenderingContext2d, f: &Frame, run: &RunSteps, i: usize) {
    let (left, _, top_m, bottom) = f.margins;
    let ph = f.css_h - top_m - bottom;
    let y = top_m + (i as f64 + 0.5) * ph / run.ranks.len() as f64;
    let d = f.dpr;
    ctx.set_fill_style_str("#0b63c5");
    ctx.fill_rect((left - 8.0) * d, (y - 1.0) * d, 8.0 * d, 3.0 * d);
    let _ = ctx.fill_text(&format!("▶{}", run.ranks[i]), 2.0 * d, (y + 4.0) * d);
}

/// The colour scale and its ends.
fn scale(ctx: &CanvasRenderingContext2d, f: &Frame, top: u64) {
    let (_, right, top_m, bottom) = f.margins;
    let d = f.dpr;
    let (sx, sy, sh) = (f.css_w - right + 16.0, top_m, f.css_h - top_m - bottom);
    for k in 0..=100 {
        let [r, g, b] = colour(1.0 - k as f64 / 100.0);
        ctx.set_fill_style_str(&format!("rgb({r},{g},{b})"));
        ctx.fill_rect(
            sx * d,
            (sy + sh * k as f64 / 101.0) * d,
            14.0 * d,
            sh / 100.0 * d + 1.0,
        );
    }
    let unit = Unit::for_values(Quantity::Duration, &[top as f64 * 1e-9]);
    ctx.set_fill_style_str("#1d2329");
    let _ = ctx.fill_text(
        &unit.show(top as f64 * 1e-9),
        (sx + 18.0) * d,
        (sy + 10.0) * d,
    );
    let _ = ctx.fill_text(&unit.show(0.0), (sx + 18.0) * d, (sy + sh) * d);
}

fn labels(ctx: &CanvasRenderingContext2d, f: &Frame, run: &RunSteps, stage: Stage, top: u64) {
    let (left, right, top_m, bottom) = f.margins;
    let d = f.dpr;
    ctx.set_fill_style_str("#1d2329");
    ctx.set_font(&format!("{}px sans-serif", 13.0 * d));
    let _ = ctx.fill_text(
        &format!(
            "{} time per step, rank × step — diagnostic — synchronized at every stage{}",
            stage.as_str(),
            if top == 0 { " (all zero)" } else { "" }
        ),
        left * d,
        18.0 * d,
    );
    ctx.set_font(&format!("{}px sans-serif", 11.0 * d));
    let (pw, ph) = (f.css_w - left - right, f.css_h - top_m - bottom);
    let n = run.ranks.len();
    // Up to eight rank labels at the rows they name.
    let every = n.div_ceil(8).max(1);
    for (row, rank) in run.ranks.iter().enumerate().step_by(every) {
        let y = top_m + (row as f64 + 0.5) * ph / n as f64;
        let _ = ctx.fill_text(&format!("{rank}"), 6.0 * d, (y + 4.0) * d);
    }
    let _ = ctx.fill_text("rank", 6.0 * d, (top_m - 2.0) * d);
    let steps = run.steps as usize;
    for k in 0..=4 {
        let step = steps.saturating_sub(1) * k / 4;
        let x = left + pw * step as f64 / steps.max(1) as f64;
        let _ = ctx.fill_text(&format!("{step}"), x * d, (f.css_h - bottom + 14.0) * d);
    }
    let caption = if n as f64 > ph * d {
        "step; each pixel shows the largest value of its ranks and steps"
    } else {
        "step (bins of steps show their largest value)"
    };
    let _ = ctx.fill_text(caption, (left + pw / 2.0 - 140.0) * d, (f.css_h - 6.0) * d);
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::charts::test_gen::Gen;

    /// Over generated runs of up to 3,000 ranks: every rank's largest value
    /// is in its bucket's row (so a slow rank is never averaged away), every
    /// cell is zero or one of its ranks' values, the grid has no more
    /// buckets than ranks or pixel rows nor bins than steps or pixels, and
    /// the top is the largest value.
    #[test]
    fn heat_map_grid_keeps_every_ranks_peak() {
        let mut g = Gen(0x5EED_1234_ABCD_0001);
        for _ in 0..120 {
            let n = 1 + g.next(3000) as usize;
            let rows: Vec<Vec<u64>> = (0..n)
                .map(|_| (0..1 + g.next(60)).map(|_| g.next(1_000_000)).collect())
                .collect();
            let with: Vec<(u32, &[u64])> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| (i as u32 * 2, &r[..]))
                .collect();
            let run = RunSteps::from_rows(0, 1, Phase::Steady, &with);
            let (ph, pw) = (1 + g.next(1200) as usize, 1 + g.next(600) as usize);
            let grid = grid(&run, ph, pw);
            assert!(grid.buckets <= ph && grid.buckets <= n);
            assert!(grid.bins <= pw && grid.bins <= run.steps as usize);
            assert_eq!(grid.cells.len(), grid.buckets * grid.bins);
            let mut overall = 0;
            for (i, row) in rows.iter().enumerate() {
                let peak = *row.iter().max().unwrap();
                overall = overall.max(peak);
                let b = bucket_of(i, n, grid.buckets);
                let cells = &grid.cells[b * grid.bins..][..grid.bins];
                assert!(
                    *cells.iter().max().unwrap() >= peak,
                    "rank {i} lost its peak"
                );
            }
            assert_eq!(grid.top, overall);
            // Every pixel row maps to a bucket and every bucket is drawn.
            let drawn: std::collections::BTreeSet<usize> =
                (0..ph).map(|y| y * grid.buckets / ph).collect();
            assert_eq!(drawn.len(), grid.buckets);
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
