//! The distribution of per-step times (next-wait + transfer + compute + comm, from a
//! diagnostic run's `steps` columns) as a histogram, log-binned when the
//! range is wide, with the run's own median and p95 marked.
//!
//! The binning is display only; it computes no figure that is shown as a
//! number (the median and p95 come from the bundle's `step` statistics).

use plotters::prelude::*;
use stallscope_bundle::analysis::{Quantity, Unit};
use stallscope_bundle::{Configuration, Experiment, Run};
use web_sys::HtmlCanvasElement;

use super::*;

const BINS: usize = 60;

/// Configurations that have per-step records.
pub fn configurations_with_steps(e: &Experiment) -> Vec<&Configuration> {
    e.configurations
        .iter()
        .filter(|c| step_run(c).is_some())
        .collect()
}

/// The first diagnostic run of a configuration with per-step records.
pub fn step_run(c: &Configuration) -> Option<&Run> {
    c.runs
        .iter()
        .find(|r| r.steps.as_ref().is_some_and(|s| !s.compute_ns.is_empty()))
}

/// Step times binned for drawing (display only).
struct Histogram {
    /// Steps counted.
    n: usize,
    lo_s: f64,
    hi_s: f64,
    /// Linear or log₂ over the range.
    axis: Axis,
    /// The first bin's left edge and a bin's width, in axis space.
    a: f64,
    width: f64,
    counts: Vec<u64>,
}

impl Histogram {
    fn of(series: &stallscope_bundle::StepSeries) -> Result<Histogram, String> {
        let n = series
            .compute_ns
            .len()
            .min(series.transfer_ns.len())
            .min(series.next_wait_ns.len());
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        let totals: Vec<u64> = (0..n)
            .map(|i| {
                // A rank's step includes its time in the synchronisation, as
                // the bundle's `step` statistics do (format 1.2).
                let comm = series.comm_ns.get(i).copied().unwrap_or(0);
                let t =
                    series.next_wait_ns[i] + series.transfer_ns[i] + series.compute_ns[i] + comm;
                lo = lo.min(t);
                hi = hi.max(t);
                t
            })
            .collect();
        if totals.is_empty() {
            return Err("no steps".into());
        }
        let (lo_s, hi_s) = (lo as f64 * 1e-9, hi as f64 * 1e-9);
        let axis = Axis::for_values(&[lo_s.max(1e-9), hi_s]);
        let (a, b) = (axis.fwd(lo_s.max(1e-9)), axis.fwd(hi_s));
        let width = ((b - a) / BINS as f64).max(1e-12);
        let mut counts = vec![0u64; BINS];
        for t in &totals {
            let v = axis.fwd((*t as f64 * 1e-9).max(1e-9));
            let k = (((v - a) / width) as usize).min(BINS - 1);
            counts[k] += 1;
        }
        Ok(Histogram {
            n,
            lo_s,
            hi_s,
            axis,
            a,
            width,
            counts,
        })
    }
}

/// The run's own median and p95 step (the bundle's statistics), each as
/// its legend label, value and colour.
fn marks(run: &Run, unit: &Unit) -> Vec<(String, f64, RGBColor)> {
    let stat = run.diagnostic.as_ref().and_then(|d| d.step.as_ref());
    [
        (
            "median (bundle)",
            stat.and_then(|s| s.median_s),
            SWEET_GREEN,
        ),
        ("p95 (bundle)", stat.and_then(|s| s.p95_s), WAIT_RED),
    ]
    .into_iter()
    .filter_map(|(name, v, color)| {
        let v = v.filter(|v| *v > 0.0)?;
        Some((format!("{name}: {}", unit.show(v)), v, color))
    })
    .collect()
}

pub fn draw(canvas: &HtmlCanvasElement, c: &Configuration) -> ChartResult {
    let run = step_run(c).ok_or("this configuration has no per-step records")?;
    let series = run.steps.as_ref().ok_or("no per-step records")?;
    let Histogram {
        n,
        lo_s,
        hi_s,
        axis,
        a,
        width,
        counts,
    } = Histogram::of(series)?;
    let max_count = counts.iter().copied().max().unwrap_or(1) as f64;
    let unit = Unit::for_values(Quantity::Duration, &[lo_s, hi_s]);

    // Counts are whole numbers: no 0.5 ticks on a short run.
    let count_ticks: Vec<f64> = nice_ticks(0.0, max_count * 1.06)
        .into_iter()
        .filter(|t| t.fract() == 0.0)
        .collect();
    let s = Surface::new(canvas)?;
    let dpr = s.dpr;
    let px = |v: f64| (v * dpr).round() as u32;
    let font = |v: f64| ("sans-serif", v * dpr).into_font();
    let root = s.backend.into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let marks = marks(run, &unit);
    let mut legend = vec![LegendItem::new("steps per bin", COMPUTE_SLATE, Mark::Box)];
    legend.extend(
        marks
            .iter()
            .map(|(label, _, color)| LegendItem::new(label.clone(), *color, Mark::Tick)),
    );
    let x_desc = format!(
        "step time: next-wait + transfer + compute{} [{}]{}",
        if series.comm_ns.is_empty() {
            ""
        } else {
            " + comm"
        },
        unit.suffix,
        if axis.log { " (log scale)" } else { "" }
    );
    let caption = format!(
        "Per-step time of {} — {} steps, run {} (diagnostic — synchronized at every stage)",
        c.label,
        stallscope_bundle::analysis::group_thousands(&n.to_string()),
        run.id
    );
    let area = frame(canvas, &root, &caption, &legend, &[&x_desc, "steps"], dpr)?;
    let x_coord = axis.coord(&[lo_s.max(1e-9), hi_s], false, None, unit.factor);
    let y_coord = Axis::linear().coord(&[0.0, max_count], true, Some(count_ticks), 1.0);
    let mut chart = ChartBuilder::on(&area)
        .margin(px(12.0))
        .x_label_area_size(px(44.0))
        .y_label_area_size(px(70.0))
        .build_cartesian_2d(x_coord, y_coord)
        .map_err(err)?;
    let x_fmt = |v: &f64| unit.number(axis.back(*v));
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(GRID)
        .x_desc(x_desc.as_str())
        .y_desc("steps")
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&|v: &f64| short_number(*v))
        .label_style(font(12.0))
        .axis_desc_style(font(12.0))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(
            counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(k, count)| {
                    let x0 = a + k as f64 * width;
                    Rectangle::new(
                        [(x0, 0.0), (x0 + width, *count as f64)],
                        COMPUTE_SLATE.filled(),
                    )
                }),
        )
        .map_err(err)?;
    for (_, v, color) in marks {
        let x = axis.fwd(v);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.0), (x, max_count * 1.04)],
                color.stroke_width(px(2.0)),
            )))
            .map_err(err)?;
    }
    root.present().map_err(err)
}
