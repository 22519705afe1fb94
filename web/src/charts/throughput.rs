//! Whole-run throughput against the swept parameter (median with min–max),
//! peak memory on a second axis, and the sweet spot marked.

use plotters::chart::DualCoordChartContext;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters_canvas::CanvasBackend;
use stallscope_bundle::analysis::{
    DEFAULT_SWEET_SPOT_THRESHOLD, Metric, MetricKey, SweetSpot, Unit, has_metric, metric_summary,
    metric_value, preferred_phase, sweet_spot, throughput_metric,
};
use stallscope_bundle::{Experiment, Phase, TimingMode};
use web_sys::HtmlCanvasElement;

use super::*;

/// Whether the experiment has what this chart needs.
/// A line needs one series with two points or more (else: bars, see `rates`).
pub fn applies(e: &Experiment) -> bool {
    grouped_points(e).iter().any(|(_, p)| p.len() >= 2)
}

/// x, median, min, max of one configuration.
type Point = (f64, f64, f64, f64);

/// Every configuration with a numeric first swept value.
fn points(e: &Experiment) -> Vec<Point> {
    grouped_points(e).into_iter().flat_map(|(_, p)| p).collect()
}

/// The points as one series per combination of the other swept parameters
/// (e.g. pinned × non-blocking), each sorted by x, in the bundle's order.
fn grouped_points(e: &Experiment) -> Vec<(String, Vec<Point>)> {
    let Some(param) = e.swept.first() else {
        return Vec::new();
    };
    let key = MetricKey::new(
        throughput_metric(e),
        TimingMode::WholeRun,
        preferred_phase(e),
    );
    let mut groups: Vec<(String, Vec<Point>)> = Vec::new();
    for c in &e.configurations {
        let Some(x) = c.params.get(param).and_then(|v| v.as_f64()) else {
            continue;
        };
        let Some(s) = metric_summary(c, &key) else {
            continue;
        };
        let group: Vec<String> = e.swept[1..]
            .iter()
            .filter_map(|p| c.params.get(p).map(|v| format!("{p} {v}")))
            .collect();
        let group = group.join(", ");
        let point = (x, s.median, s.min, s.max);
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, pts)) => pts.push(point),
            None => groups.push((group, vec![point])),
        }
    }
    for (_, pts) in &mut groups {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    groups
}

const PALETTE: [RGBColor; 6] = [
    SERIES_BLUE,
    RGBColor(20, 150, 150),
    RGBColor(150, 60, 160),
    RGBColor(140, 120, 20),
    RGBColor(200, 70, 120),
    RGBColor(80, 80, 80),
];

/// The memory metric drawn on the second axis, if any.
fn memory_metric(e: &Experiment) -> Option<Metric> {
    let phase = preferred_phase(e);
    [Metric::PeakAllocatedBytes, Metric::HostPeakRssBytes]
        .into_iter()
        .find(|m| has_metric(e, &MetricKey::new(*m, TimingMode::WholeRun, phase)))
}

/// The chart's drawing context: throughput on the left axis, memory on the
/// right.
type Chart<'a> = DualCoordChartContext<
    'a,
    CanvasBackend,
    Cartesian2d<AxisCoord, AxisCoord>,
    Cartesian2d<AxisCoord, AxisCoord>,
>;

/// CSS pixels to device pixels.
#[derive(Clone, Copy)]
struct Scale(f64);

impl Scale {
    fn px(self, v: f64) -> u32 {
        (v * self.0).round() as u32
    }

    fn font(self, v: f64) -> FontDesc<'static> {
        ("sans-serif", v * self.0).into_font()
    }
}

/// What the chart plots, and the units and axes it plots them in.
struct Plot {
    param: String,
    phase: Phase,
    metric: Metric,
    /// Every configuration's min and max rate.
    rates: Vec<f64>,
    rate_unit: Unit,
    xs: Vec<f64>,
    x_axis: Axis,
    memory: MemoryPlot,
}

/// Peak memory on the second axis (no points: no second axis).
struct MemoryPlot {
    metric: Option<Metric>,
    points: Vec<(f64, f64)>,
    values: Vec<f64>,
    axis: Axis,
    unit: Unit,
}

impl Plot {
    fn of(e: &Experiment) -> Self {
        let pts = points(e);
        let param = e.swept.first().cloned().unwrap_or_default();
        let phase = preferred_phase(e);
        let metric = throughput_metric(e);
        let rates: Vec<f64> = pts.iter().flat_map(|p| [p.2, p.3]).collect();
        let rate_unit = Unit::for_values(metric.quantity(), &rates);
        let xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
        let x_axis = Axis::for_values(&xs);
        let memory = MemoryPlot::of(e, &param, phase);
        Plot {
            param,
            phase,
            metric,
            rates,
            rate_unit,
            xs,
            x_axis,
            memory,
        }
    }
}

impl MemoryPlot {
    /// The memory metric's value of every configuration with a numeric
    /// `param`, sorted by it.
    fn of(e: &Experiment, param: &str, phase: Phase) -> Self {
        let metric = memory_metric(e);
        let points: Vec<(f64, f64)> = metric
            .map(|m| {
                let key = MetricKey::new(m, TimingMode::WholeRun, phase);
                let mut v: Vec<(f64, f64)> = e
                    .configurations
                    .iter()
                    .filter_map(|c| Some((c.params.get(param)?.as_f64()?, metric_value(c, &key)?)))
                    .collect();
                v.sort_by(|a, b| a.0.total_cmp(&b.0));
                v
            })
            .unwrap_or_default();
        let values: Vec<f64> = points.iter().map(|p| p.1).collect();
        MemoryPlot {
            metric,
            axis: Axis::for_values(&values),
            unit: Unit::for_values(stallscope_bundle::analysis::Quantity::Bytes, &values),
            points,
            values,
        }
    }
}

pub fn draw(canvas: &HtmlCanvasElement, e: &Experiment) -> ChartResult {
    let s = Surface::new(canvas)?;
    let plot = Plot::of(e);
    let root = s.backend.into_drawing_area();
    // `s.backend` moved; keep the scale.
    let d = Scale(s.dpr);
    root.fill(&WHITE).map_err(err)?;
    let spot = sweet_spot(e, DEFAULT_SWEET_SPOT_THRESHOLD);
    let groups = grouped_points(e);
    let single = groups.len() == 1;
    let labels: Vec<String> = groups
        .iter()
        .map(|(group, _)| {
            if single {
                format!("{} (median, min–max)", plot.metric.label())
            } else {
                format!("{}: {group}", plot.metric.label())
            }
        })
        .collect();
    let legend = legend(&plot, spot.as_ref(), &labels);
    let (x_desc, y_desc, m_desc) = descriptions(&plot);
    let caption = format!(
        "Whole-run throughput vs {} ({} epochs)",
        plot.param,
        plot.phase.as_str()
    );
    let mut axes = vec![x_desc.as_str(), y_desc.as_str()];
    if !plot.memory.points.is_empty() {
        axes.push(m_desc.as_str());
    }
    let area = frame(canvas, &root, &caption, &legend, &axes, s.dpr)?;
    let mut chart = chart(&area, &plot, d)?;
    draw_axes(&mut chart, &plot, (&x_desc, &y_desc, &m_desc), d)?;
    // Sweet spot first, so the series draw over it.
    if let Some(spot) = &spot {
        draw_sweet_spot(&mut chart, &plot, spot, d)?;
    }
    for (k, (_, pts)) in groups.iter().enumerate() {
        draw_group(&mut chart, &plot, pts, PALETTE[k % PALETTE.len()], d)?;
    }
    if !plot.memory.points.is_empty() {
        draw_memory(&mut chart, &plot, single, d)?;
    }
    root.present().map_err(err)
}

/// The legend, in drawing order: the sweet spot, the series, memory.
fn legend(plot: &Plot, spot: Option<&SweetSpot>, labels: &[String]) -> Vec<LegendItem> {
    let mut out = Vec::new();
    if let Some(spot) = spot {
        out.push(LegendItem::new(
            format!(
                "sweet spot: {} {} ({:.0}% of best)",
                plot.param,
                spot.value,
                spot.fraction_of_best * 100.0
            ),
            SWEET_GREEN,
            Mark::Tick,
        ));
        out.push(LegendItem::new(
            format!("{:.0}% of the best", spot.threshold * 100.0),
            SWEET_GREEN,
            Mark::Dashed,
        ));
    }
    for (k, label) in labels.iter().enumerate() {
        out.push(LegendItem::new(
            label.clone(),
            PALETTE[k % PALETTE.len()],
            Mark::Line,
        ));
    }
    if let Some(m) = plot
        .memory
        .metric
        .filter(|_| !plot.memory.points.is_empty())
    {
        out.push(LegendItem::new(
            format!("{} (right axis)", m.label()),
            MEMORY_ORANGE,
            Mark::Line,
        ));
    }
    out
}

/// The axes' titles: x, the rate (its label says its unit: no `[s]`), memory.
fn descriptions(plot: &Plot) -> (String, String, String) {
    let x = format!(
        "{}{}",
        plot.param,
        if plot.x_axis.log { " (log scale)" } else { "" }
    );
    let y = format!("{} (whole-run)", rate_title(plot.metric, &plot.rate_unit));
    let mem = &plot.memory;
    let m = format!(
        "{} [{}]{}",
        mem.metric.map(|m| m.label()).unwrap_or(""),
        mem.unit.suffix,
        if mem.axis.log { " (log)" } else { "" }
    );
    (x, y, m)
}

/// The chart's frame: label areas (a right one for memory) and both
/// coordinate systems, under the caption and legend of [`frame`].
fn chart<'a>(
    root: &'a DrawingArea<CanvasBackend, Shift>,
    plot: &Plot,
    d: Scale,
) -> Result<Chart<'a>, String> {
    let (xs, mem) = (&plot.xs, &plot.memory);
    let x_coord = plot.x_axis.coord(xs, false, Some(xs.clone()), 1.0);
    let y_coord = Axis::linear().coord(&plot.rates, true, None, plot.rate_unit.factor);
    Ok(ChartBuilder::on(root)
        .margin(d.px(12.0))
        .x_label_area_size(d.px(44.0))
        .y_label_area_size(d.px(70.0))
        .right_y_label_area_size(if mem.points.is_empty() { 0 } else { d.px(70.0) })
        .build_cartesian_2d(x_coord.clone(), y_coord)
        .map_err(err)?
        .set_secondary_coord(
            x_coord,
            mem.axis
                .coord(&mem.values, !mem.axis.log, None, mem.unit.factor),
        ))
}

/// The mesh, both axes' labels and, with memory, the right axis.
fn draw_axes(chart: &mut Chart, plot: &Plot, desc: (&str, &str, &str), d: Scale) -> ChartResult {
    let x_fmt = |v: &f64| short_number(plot.x_axis.back(*v));
    let y_fmt = |v: &f64| short_number(*v * plot.rate_unit.factor);
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(GRID)
        .x_desc(desc.0)
        .y_desc(desc.1)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(d.font(12.0))
        .axis_desc_style(d.font(12.0))
        .draw()
        .map_err(err)?;
    let mem = &plot.memory;
    if !mem.points.is_empty() {
        let m_fmt = |v: &f64| short_number(mem.axis.back(*v) * mem.unit.factor);
        chart
            .configure_secondary_axes()
            .y_desc(desc.2)
            .y_label_formatter(&m_fmt)
            .label_style(d.font(12.0))
            .axis_desc_style(d.font(12.0))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

/// The sweet spot's vertical line and the threshold's dashed one.
fn draw_sweet_spot(chart: &mut Chart, plot: &Plot, spot: &SweetSpot, d: Scale) -> ChartResult {
    let (x_axis, xs) = (&plot.x_axis, &plot.xs);
    let x = x_axis.fwd(spot.value);
    let top = plot.rates.iter().copied().fold(0.0, f64::max) * 1.04;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(x, 0.0), (x, top)],
            SWEET_GREEN.stroke_width(d.px(2.0)),
        )))
        .map_err(err)?;
    let threshold = spot.threshold * spot.best_rate;
    chart
        .draw_series(DashedLineSeries::new(
            vec![
                (x_axis.fwd(xs[0]), threshold),
                (x_axis.fwd(xs[xs.len() - 1]), threshold),
            ],
            d.px(4.0),
            d.px(4.0),
            SWEET_GREEN.mix(0.6).stroke_width(d.px(1.0)),
        ))
        .map_err(err)?;
    Ok(())
}

/// One series: min–max bars, the median line and its points.
fn draw_group(
    chart: &mut Chart,
    plot: &Plot,
    pts: &[Point],
    color: RGBColor,
    d: Scale,
) -> ChartResult {
    let x_axis = &plot.x_axis;
    chart
        .draw_series(pts.iter().map(|p| {
            ErrorBar::new_vertical(
                x_axis.fwd(p.0),
                p.2,
                p.1,
                p.3,
                color.stroke_width(d.px(1.0)),
                d.px(8.0),
            )
        }))
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            pts.iter().map(|p| (x_axis.fwd(p.0), p.1)),
            color.stroke_width(d.px(2.0)),
        ))
        .map_err(err)?;
    chart
        .draw_series(
            pts.iter()
                .map(|p| Circle::new((x_axis.fwd(p.0), p.1), d.px(3.5), color.filled())),
        )
        .map_err(err)?;
    Ok(())
}

/// Peak memory on the right axis: its points, and a line through them
/// when there is one series (with several, one line would zigzag between
/// them).
fn draw_memory(chart: &mut Chart, plot: &Plot, single: bool, d: Scale) -> ChartResult {
    let (x_axis, mem) = (&plot.x_axis, &plot.memory);
    let line = if single {
        mem.points.clone()
    } else {
        Vec::new()
    };
    chart
        .draw_secondary_series(LineSeries::new(
            line.iter().map(|p| (x_axis.fwd(p.0), mem.axis.fwd(p.1))),
            MEMORY_ORANGE.stroke_width(d.px(2.0)),
        ))
        .map_err(err)?;
    chart
        .draw_secondary_series(mem.points.iter().map(|p| {
            TriangleMarker::new(
                (x_axis.fwd(p.0), mem.axis.fwd(p.1)),
                d.px(4.0),
                MEMORY_ORANGE.filled(),
            )
        }))
        .map_err(err)?;
    Ok(())
}
