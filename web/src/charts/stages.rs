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
    let x_coord = AxisCoord::new(-0.6..n as f64 - 0.4, (0..n).map(|i| i as f64).collect());
    let y_coord = Axis::linear().coord(&totals, true, None, unit.factor);
    let mut chart = ChartBuilder::on(&root)
        .margin(px(12.0))
        .caption(
            format!(
                "Stage breakdown per step — diagnostic — synchronized at every stage ({} epochs)",
                preferred_phase(e).as_str()
            ),
            font(15.0),
        )
        .x_label_area_size(px(44.0))
        .y_label_area_size(px(70.0))
        .build_cartesian_2d(x_coord, y_coord)
        .map_err(err)?;
    let labels: Vec<String> = bars.iter().map(|(l, _)| l.clone()).collect();
    let x_fmt = |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 {
            labels.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let y_fmt = |v: &f64| unit.number(*v);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(WHITE)
        .bold_line_style(GRID)
        .x_desc("configuration")
        .y_desc(format!("mean time per step [{}] (diagnostic)", unit.suffix))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(font(12.0))
        .axis_desc_style(font(12.0))
        .draw()
        .map_err(err)?;
    // Comm only for ranked runs (a single process has none).
    let with_comm = bars.iter().any(|(_, v)| v[3] > 0.0);
    for (k, (_, name, color)) in STAGES.iter().enumerate() {
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
            .map_err(err)?
            .label(*name)
            .legend(move |(lx, ly)| {
                Rectangle::new([(lx, ly - 5), (lx + 12, ly + 5)], color.filled())
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(GRID)
        .label_font(font(12.0))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
