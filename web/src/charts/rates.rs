//! Whole-run throughput per configuration as bars (median with min–max),
//! for experiments whose swept parameter is not a number (worker kind, the
//! three ways of a stall experiment) and so has no axis to plot against.

use plotters::prelude::*;
use stallscope_bundle::analysis::{
    MetricKey, Unit, metric_summary, preferred_phase, throughput_metric,
};
use stallscope_bundle::{Experiment, TimingMode};
use web_sys::HtmlCanvasElement;

use super::*;

/// (label, median, min, max) per configuration with a whole-run figure.
fn bars(e: &Experiment) -> Vec<(String, f64, f64, f64)> {
    let key = MetricKey::new(
        throughput_metric(e),
        TimingMode::WholeRun,
        preferred_phase(e),
    );
    e.configurations
        .iter()
        .filter_map(|c| {
            let s = metric_summary(c, &key)?;
            Some((c.label.clone(), s.median, s.min, s.max))
        })
        .collect()
}

/// When the line chart does not apply but there are figures to compare.
pub fn applies(e: &Experiment) -> bool {
    !super::throughput::applies(e) && bars(e).len() >= 2
}

pub fn draw(canvas: &HtmlCanvasElement, e: &Experiment) -> ChartResult {
    let s = Surface::new(canvas)?;
    let dpr = s.dpr;
    let px = |v: f64| (v * dpr).round() as u32;
    let font = |v: f64| ("sans-serif", v * dpr).into_font();
    let bars = bars(e);
    let metric = throughput_metric(e);
    let values: Vec<f64> = bars.iter().flat_map(|b| [b.2, b.3]).collect();
    let unit = Unit::for_values(metric.quantity(), &values);
    let n = bars.len();
    let root = s.backend.into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let caption = format!(
        "Whole-run {} per configuration ({} epochs)",
        metric.label(),
        preferred_phase(e).as_str()
    );
    let y_desc = format!("{} (whole-run)", rate_title(metric, &unit));
    let mut legend = vec![LegendItem::new(
        format!("{} (median)", metric.label()),
        SERIES_BLUE,
        Mark::Box,
    )];
    if bars.iter().any(|b| b.2 < b.3) {
        legend.push(LegendItem::new("min–max of the repeats", BLACK, Mark::Tick));
    }
    let area = frame(
        canvas,
        &root,
        &caption,
        &legend,
        &["configuration", &y_desc],
        dpr,
    )?;
    let x_coord = AxisCoord::new(-0.6..n as f64 - 0.4, (0..n).map(|i| i as f64).collect());
    let y_coord = Axis::linear().coord(&values, true, None, unit.factor);
    let mut chart = ChartBuilder::on(&area)
        .margin(px(12.0))
        .x_label_area_size(px(44.0))
        .y_label_area_size(px(70.0))
        .build_cartesian_2d(x_coord, y_coord)
        .map_err(err)?;
    let raw: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let labels = fit_labels(&raw, f64::from(canvas.client_width()));
    let x_fmt = |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 {
            labels.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let y_fmt = |v: &f64| short_number(*v * unit.factor);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(WHITE)
        .bold_line_style(GRID)
        .x_desc("configuration")
        .y_desc(y_desc.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(font(12.0))
        .axis_desc_style(font(12.0))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let x = i as f64;
            Rectangle::new(
                [(x - 0.3, 0.0), (x + 0.3, b.1)],
                SERIES_BLUE.mix(0.85).filled(),
            )
        }))
        .map_err(err)?;
    chart
        .draw_series(
            bars.iter()
                .enumerate()
                .filter(|(_, b)| b.2 < b.3)
                .map(|(i, b)| {
                    ErrorBar::new_vertical(
                        i as f64,
                        b.2,
                        b.1,
                        b.3,
                        BLACK.stroke_width(px(1.0)),
                        px(10.0),
                    )
                }),
        )
        .map_err(err)?;
    root.present().map_err(err)
}
