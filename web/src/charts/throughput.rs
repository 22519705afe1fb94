//! Whole-run throughput against the swept parameter (median with min–max),
//! peak memory on a second axis, and the sweet spot marked.

use plotters::prelude::*;
use stallscope_bundle::analysis::{
    DEFAULT_SWEET_SPOT_THRESHOLD, Metric, MetricKey, Unit, has_metric, metric_summary,
    metric_value, preferred_phase, sweet_spot, throughput_metric,
};
use stallscope_bundle::{Experiment, TimingMode};
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

pub fn draw(canvas: &HtmlCanvasElement, e: &Experiment) -> ChartResult {
    let s = Surface::new(canvas)?;
    let pts = points(e);
    let param = e.swept.first().cloned().unwrap_or_default();
    let phase = preferred_phase(e);
    let metric = throughput_metric(e);
    let rates: Vec<f64> = pts.iter().flat_map(|p| [p.2, p.3]).collect();
    let rate_unit = Unit::for_values(metric.quantity(), &rates);
    let xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
    let x_axis = Axis::for_values(&xs);
    let y_axis = Axis::linear();

    let mem_metric = memory_metric(e);
    let mem_points: Vec<(f64, f64)> = mem_metric
        .map(|m| {
            let key = MetricKey::new(m, TimingMode::WholeRun, phase);
            let mut v: Vec<(f64, f64)> = e
                .configurations
                .iter()
                .filter_map(|c| Some((c.params.get(&param)?.as_f64()?, metric_value(c, &key)?)))
                .collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            v
        })
        .unwrap_or_default();
    let mem_values: Vec<f64> = mem_points.iter().map(|p| p.1).collect();
    let mem_axis = Axis::for_values(&mem_values);
    let mem_unit = Unit::for_values(stallscope_bundle::analysis::Quantity::Bytes, &mem_values);

    let root = s.backend.into_drawing_area();
    // `s.backend` moved; keep the scale.
    let dpr = s.dpr;
    let px = |v: f64| (v * dpr).round() as u32;
    let font = |v: f64| ("sans-serif", v * dpr).into_font();
    root.fill(&WHITE).map_err(err)?;

    let x_coord = x_axis.coord(&xs, false, Some(xs.clone()), 1.0);
    let y_coord = y_axis.coord(&rates, true, None, rate_unit.factor);
    let mut chart = ChartBuilder::on(&root)
        .margin(px(12.0))
        .caption(
            format!(
                "Whole-run throughput vs {param} ({} epochs)",
                phase.as_str()
            ),
            font(15.0),
        )
        .x_label_area_size(px(44.0))
        .y_label_area_size(px(70.0))
        .right_y_label_area_size(if mem_points.is_empty() { 0 } else { px(70.0) })
        .build_cartesian_2d(x_coord.clone(), y_coord)
        .map_err(err)?
        .set_secondary_coord(
            x_coord,
            mem_axis.coord(&mem_values, !mem_axis.log, None, mem_unit.factor),
        );

    let x_fmt = |v: &f64| short_number(x_axis.back(*v));
    let y_fmt = |v: &f64| short_number(*v * rate_unit.factor);
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(GRID)
        .x_desc(format!(
            "{param}{}",
            if x_axis.log { " (log scale)" } else { "" }
        ))
        .y_desc(format!(
            "{} [{}] (whole-run)",
            metric.label(),
            rate_unit.suffix.trim_start_matches('/')
        ))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(font(12.0))
        .axis_desc_style(font(12.0))
        .draw()
        .map_err(err)?;

    if !mem_points.is_empty() {
        let m_fmt = |v: &f64| short_number(mem_axis.back(*v) * mem_unit.factor);
        chart
            .configure_secondary_axes()
            .y_desc(format!(
                "{} [{}]{}",
                mem_metric.map(|m| m.label()).unwrap_or(""),
                mem_unit.suffix,
                if mem_axis.log { " (log)" } else { "" }
            ))
            .y_label_formatter(&m_fmt)
            .label_style(font(12.0))
            .axis_desc_style(font(12.0))
            .draw()
            .map_err(err)?;
    }

    // Sweet spot first, so the series draw over it.
    if let Some(spot) = sweet_spot(e, DEFAULT_SWEET_SPOT_THRESHOLD) {
        let x = x_axis.fwd(spot.value);
        let top = rates.iter().copied().fold(0.0, f64::max) * 1.04;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.0), (x, top)],
                SWEET_GREEN.stroke_width(px(2.0)),
            )))
            .map_err(err)?
            .label(format!(
                "sweet spot: {param} {} ({:.0}% of best)",
                spot.value,
                spot.fraction_of_best * 100.0
            ))
            .legend(move |(lx, ly)| {
                PathElement::new(
                    vec![(lx, ly - 6), (lx, ly + 6)],
                    SWEET_GREEN.stroke_width(2),
                )
            });
        let threshold = spot.threshold * spot.best_rate;
        chart
            .draw_series(DashedLineSeries::new(
                vec![
                    (x_axis.fwd(xs[0]), threshold),
                    (x_axis.fwd(xs[xs.len() - 1]), threshold),
                ],
                px(4.0),
                px(4.0),
                SWEET_GREEN.mix(0.6).stroke_width(px(1.0)),
            ))
            .map_err(err)?
            .label(format!("{:.0}% of the best", spot.threshold * 100.0))
            .legend(move |(lx, ly)| {
                PathElement::new(vec![(lx, ly), (lx + 16, ly)], SWEET_GREEN.mix(0.6))
            });
    }

    let groups = grouped_points(e);
    let single = groups.len() == 1;
    for (k, (group, pts)) in groups.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        chart
            .draw_series(pts.iter().map(|p| {
                ErrorBar::new_vertical(
                    x_axis.fwd(p.0),
                    p.2,
                    p.1,
                    p.3,
                    color.stroke_width(px(1.0)),
                    px(8.0),
                )
            }))
            .map_err(err)?;
        let label = if single {
            format!("{} (median, min–max)", metric.label())
        } else {
            format!("{}: {group}", metric.label())
        };
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (x_axis.fwd(p.0), p.1)),
                color.stroke_width(px(2.0)),
            ))
            .map_err(err)?
            .label(label)
            .legend(move |(lx, ly)| {
                PathElement::new(vec![(lx, ly), (lx + 16, ly)], color.stroke_width(2))
            });
        chart
            .draw_series(
                pts.iter()
                    .map(|p| Circle::new((x_axis.fwd(p.0), p.1), px(3.5), color.filled())),
            )
            .map_err(err)?;
    }

    if let Some(m) = mem_metric.filter(|_| !mem_points.is_empty()) {
        // With several series, one memory line would zigzag between them.
        let line = if single {
            mem_points.clone()
        } else {
            Vec::new()
        };
        chart
            .draw_secondary_series(LineSeries::new(
                line.iter().map(|p| (x_axis.fwd(p.0), mem_axis.fwd(p.1))),
                MEMORY_ORANGE.stroke_width(px(2.0)),
            ))
            .map_err(err)?
            .label(format!("{} (right axis)", m.label()))
            .legend(|(lx, ly)| {
                PathElement::new(vec![(lx, ly), (lx + 16, ly)], MEMORY_ORANGE.stroke_width(2))
            });
        chart
            .draw_secondary_series(mem_points.iter().map(|p| {
                TriangleMarker::new(
                    (x_axis.fwd(p.0), mem_axis.fwd(p.1)),
                    px(4.0),
                    MEMORY_ORANGE.filled(),
                )
            }))
            .map_err(err)?;
    }

    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(GRID)
        .label_font(font(12.0))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
