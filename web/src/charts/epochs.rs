//! First (cold) epoch vs steady epochs, whole-run epoch seconds side by side
//! per configuration: start-up, first reads and cold caches show in the first.

use plotters::prelude::*;
use stallscope_bundle::analysis::{Metric, MetricKey, Quantity, Unit, metric_value};
use stallscope_bundle::{Experiment, Phase, TimingMode};
use web_sys::HtmlCanvasElement;

use super::*;

const COLD: RGBColor = RGBColor(90, 160, 220);

/// (label, cold, steady) whole-run epoch seconds.
fn pairs(e: &Experiment) -> Vec<(String, Option<f64>, Option<f64>)> {
    let key = |p| MetricKey::new(Metric::EpochS, TimingMode::WholeRun, p);
    e.configurations
        .iter()
        .map(|c| {
            (
                c.label.clone(),
                metric_value(c, &key(Phase::Cold)),
                metric_value(c, &key(Phase::Steady)),
            )
        })
        .filter(|(_, a, b)| a.is_some() || b.is_some())
        .collect()
}

/// Only when some configuration has both a cold and a steady figure.
pub fn applies(e: &Experiment) -> bool {
    pairs(e).iter().any(|(_, a, b)| a.is_some() && b.is_some())
}

pub fn draw(canvas: &HtmlCanvasElement, e: &Experiment) -> ChartResult {
    let s = Surface::new(canvas)?;
    let dpr = s.dpr;
    let px = |v: f64| (v * dpr).round() as u32;
    let font = |v: f64| ("sans-serif", v * dpr).into_font();
    let pairs = pairs(e);
    let values: Vec<f64> = pairs
        .iter()
        .flat_map(|(_, a, b)| [*a, *b])
        .flatten()
        .collect();
    let unit = Unit::for_values(Quantity::Duration, &values);
    let n = pairs.len();
    let root = s.backend.into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let series = [("first (cold) epoch", COLD), ("steady epochs", SERIES_BLUE)];
    let legend: Vec<LegendItem> = series
        .iter()
        .map(|(name, color)| LegendItem::new(*name, *color, Mark::Box))
        .collect();
    let y_desc = format!("epoch [{}] (whole-run)", unit.suffix);
    let area = frame(
        canvas,
        &root,
        "First epoch vs steady epochs (whole-run epoch time, median)",
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
    let raw: Vec<String> = pairs.iter().map(|(l, _, _)| l.clone()).collect();
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
    for (k, (_, color)) in series.into_iter().enumerate() {
        chart
            .draw_series(pairs.iter().enumerate().filter_map(|(i, (_, a, b))| {
                let v = if k == 0 { (*a)? } else { (*b)? };
                let x0 = i as f64 - 0.32 + k as f64 * 0.32;
                Some(Rectangle::new([(x0, 0.0), (x0 + 0.3, v)], color.filled()))
            }))
            .map_err(err)?;
    }
    root.present().map_err(err)
}
