//! The diagnostic stage breakdown (next-wait / transfer / compute per step,
//! and comm for the ranks of a merged bundle)
//! as stacked bars, one per configuration. Labelled as diagnostic: these are
//! synchronized figures and say where a step waits, not how fast it runs.

use plotters::prelude::*;
use stallscope_bundle::analysis::{
    Metric, MetricKey, Quantity, Unit, metric_value, preferred_phase,
};
use stallscope_bundle::{Experiment, TimingMode};
use web_sys::HtmlCanvasElement;

use super::*;

const STAGES: [(Metric, &str, RGBColor); 4] = [
    (Metric::NextWaitMeanS, "next-wait", WAIT_RED),
    (Metric::TransferMeanS, "transfer", TRANSFER_PURPLE),
    (Metric::ComputeMeanS, "compute", COMPUTE_SLATE),
    (Metric::CommMeanS, "comm", COMM_TEAL),
];

/// (label, [wait, transfer, compute, comm]) mean seconds per step.
fn bars(e: &Experiment) -> Vec<(String, [f64; 4])> {
    let phase = preferred_phase(e);
    e.configurations
        .iter()
        .filter_map(|c| {
            let v = STAGES.map(|(m, _, _)| {
                metric_value(c, &MetricKey::new(m, TimingMode::Diagnostic, phase))
            });
            v.iter()
                .any(Option::is_some)
                .then(|| (c.label.clone(), v.map(|x| x.unwrap_or(0.0))))
        })
        .collect()
}

pub fn applies(e: &Experiment) -> bool {
    !bars(e).is_empty()
}

pub fn draw(canvas: &HtmlCanvasElement, e: &Experiment) -> ChartResult {
    let s = Surface::new(canvas)?;
    let dpr = s.dpr;
    let px = |v: f64| (v * dpr).round() as u32;
    let font = |v: f64| ("sans-serif", v * dpr).into_font();
    let bars = bars(e);
    let totals: Vec<f64> = bars.iter().map(|(_, v)| v.iter().sum()).collect();
    let unit = Unit::for_values(Quantity::Duration, &totals);
    let n = bars.len();
    let root = s.backend.into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    // Comm only for ranked runs (a single process has none).
    let with_comm = bars.iter().any(|(_, v)| v[3] > 0.0);
    let legend: Vec<LegendItem> = STAGES
        .iter()
        .enumerate()
        .filter(|(k, _)| *k != 3 || with_comm)
        .map(|(_, (_, name, color))| LegendItem::new(*name, *color, Mark::Box))
        .collect();
    let caption = format!(
        "Stage breakdown per step — diagnostic — synchronized at every stage ({} epochs)",
        preferred_phase(e).as_str()
    );
    let y_desc = format!("mean time per step [{}] (diagnostic)", unit.suffix);
    let area = frame(
        canvas,
        &root,
        &caption,
        &legend,
        &["configuration", &y_desc],
        dpr,
    )?;
    let x_coord = AxisCoord::new(-0.6..n as f64 - 0.4, (0..n).map(|i| i as f64).collect());
    let y_coord = Axis::linear().coord(&totals, true, None, unit.factor);
    let mut chart = ChartBuilder::on(&area)
        .margin(px(12.0))
        .x_label_area_size(px(44.0))
        .y_label_area_size(px(70.0))
        .build_cartesian_2d(x_coord, y_coord)
        .map_err(err)?;
    let raw: Vec<String> = bars.iter().map(|(l, _)| l.clone()).collect();
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
    for (k, (_, _, color)) in STAGES.iter().enumerate() {
        if k == 3 && !with_comm {
            continue;
        }
        let color = *color;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
                let base: f64 = v[..k].iter().sum();
                let x = i as f64;
                Rectangle::new([(x - 0.3, base), (x + 0.3, base + v[k])], color.filled())
            }))
            .map_err(err)?;
    }
    root.present().map_err(err)
}
