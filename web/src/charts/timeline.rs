//! A whole-run epoch's sampled counters over time (format 1.2 `Run.timeline`):
//! host CPU busy in cores and resident memory, GPU utilisation and memory
//! used when the bundle has them, and throughput beside them (steps per
//! second between two samples of the `steps` counter). One panel per
//! quantity, stacked on one canvas, sharing the time axis.
//!
//! The lines are the recorded samples; the only thing derived is the
//! display's steps-per-second (Δsteps ÷ Δt of neighbouring samples), which
//! is no figure of the report: the run's throughput stays the whole-run one.

use plotters::coord::Shift;
use plotters::prelude::*;
use stallscope_bundle::analysis::{Quantity, Unit};
use stallscope_bundle::{Configuration, Experiment, Run, Timeline, TimingMode};
use web_sys::HtmlCanvasElement;

use super::*;

/// One line: a label, its colour and (seconds, value) points.
type Line = (String, RGBColor, Vec<(f64, f64)>);

/// Configurations with a whole-run run that carries a timeline.
pub fn configurations_with_timeline(e: &Experiment) -> Vec<&Configuration> {
    e.configurations
        .iter()
        .filter(|c| !timeline_runs(c).is_empty())
        .collect()
}

/// The whole-run runs of a configuration with a timeline. In a merged
/// bundle only the lowest rank's runs (the chart names it): a thousand
/// ranks' lines on top of each other would show nothing.
pub fn timeline_runs(c: &Configuration) -> Vec<&Run> {
    let with: Vec<&Run> = c
        .runs
        .iter()
        .filter(|r| r.timing_mode == TimingMode::WholeRun && r.timeline.is_some())
        .collect();
    let lowest = with.iter().filter_map(|r| r.rank).min();
    with.into_iter()
        .filter(|r| lowest.is_none() || r.rank == lowest)
        .collect()
}

/// The rank whose runs are drawn, in a merged bundle.
pub fn drawn_rank(c: &Configuration) -> Option<u32> {
    timeline_runs(c).first().and_then(|r| r.rank)
}

/// Why the GPU series are missing, as the first run with a reason says.
pub fn gpu_not_available(c: &Configuration) -> Option<String> {
    timeline_runs(c)
        .iter()
        .filter_map(|r| r.timeline.as_ref())
        .find(|t| t.gpu.is_none())
        .and_then(|t| t.gpu_not_available.clone())
}

/// (seconds, value) of one series, cut to the samples that have a time.
fn points<T: Copy + Into<f64>>(t: &Timeline, values: &[T]) -> Vec<(f64, f64)> {
    t.t_ms
        .iter()
        .zip(values)
        .map(|(ms, v)| (*ms as f64 / 1e3, (*v).into()))
        .collect()
}

fn points_u64(t: &Timeline, values: &[u64]) -> Vec<(f64, f64)> {
    t.t_ms
        .iter()
        .zip(values)
        .map(|(ms, v)| (*ms as f64 / 1e3, *v as f64))
        .collect()
}

/// Steps per second between neighbouring samples, at the later sample.
fn step_rate(t: &Timeline) -> Vec<(f64, f64)> {
    let n = t.t_ms.len().min(t.steps.len());
    (1..n)
        .filter_map(|i| {
            let dt = (t.t_ms[i] as f64 - t.t_ms[i - 1] as f64) / 1e3;
            let ds = t.steps[i] as f64 - t.steps[i - 1] as f64;
            (dt > 0.0).then(|| (t.t_ms[i] as f64 / 1e3, ds / dt))
        })
        .collect()
}

/// The panels to draw: (title, quantity, lines); a panel without points is left out.
fn panels(runs: &[&Run]) -> Vec<(&'static str, Quantity, Vec<Line>)> {
    let label = |base: &str, r: &Run| {
        if runs.len() > 1 {
            format!("{base} ({})", r.id)
        } else {
            base.to_string()
        }
    };
    let mut cpu = Vec::new();
    let mut memory = Vec::new();
    let mut gpu = Vec::new();
    let mut rate = Vec::new();
    for r in runs {
        let Some(t) = &r.timeline else { continue };
        cpu.push((
            label("host CPU", r),
            SERIES_BLUE,
            points(t, &t.host_cpu_cores),
        ));
        memory.push((
            label("host RSS", r),
            MEMORY_ORANGE,
            points_u64(t, &t.host_rss_bytes),
        ));
        if let Some(g) = &t.gpu {
            gpu.push((
                label("GPU utilisation", r),
                SWEET_GREEN,
                points(t, &g.utilization_percent),
            ));
            memory.push((
                label("GPU memory used", r),
                TRANSFER_PURPLE,
                points_u64(t, &g.memory_used_bytes),
            ));
        }
        rate.push((label("steps/s", r), COMPUTE_SLATE, step_rate(t)));
    }
    [
        ("host CPU busy [cores]", Quantity::Count, cpu),
        ("memory", Quantity::Bytes, memory),
        (
            "GPU utilisation [%] (NVML: any kernel ran)",
            Quantity::Count,
            gpu,
        ),
        (
            "throughput [steps/s between samples]",
            Quantity::Count,
            rate,
        ),
    ]
    .into_iter()
    .map(|(title, q, lines)| {
        let lines: Vec<Line> = lines.into_iter().filter(|l| !l.2.is_empty()).collect();
        (title, q, lines)
    })
    .filter(|(_, _, lines)| !lines.is_empty())
    .collect()
}

pub fn draw(canvas: &HtmlCanvasElement, c: &Configuration) -> ChartResult {
    let runs = timeline_runs(c);
    let panels = panels(&runs);
    if panels.is_empty() {
        return Err("the timeline has no samples".into());
    }
    // About 170 CSS pixels per panel.
    let _ = canvas.set_attribute("style", &format!("height:{}px", 170 * panels.len()));
    let s = Surface::new(canvas)?;
    let dpr = s.dpr;
    let root = s.backend.into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let t_end = runs
        .iter()
        .filter_map(|r| r.timeline.as_ref()?.t_ms.last().copied())
        .max()
        .unwrap_or(1) as f64
        / 1e3;
    let axes: Vec<String> = panels
        .iter()
        .map(|(title, q, _)| format!("{title} [{}]", panel_unit(*q, &[]).suffix))
        .collect();
    let _ = canvas.set_attribute("data-axes", &axes.join(" | "));
    let areas = root.split_evenly((panels.len(), 1));
    for (area, (title, quantity, lines)) in areas.iter().zip(&panels) {
        panel(area, dpr, t_end, title, *quantity, lines)?;
    }
    root.present().map_err(err)
}

fn panel(
    area: &DrawingArea<CanvasBackend, Shift>,
    dpr: f64,
    t_end: f64,
    title: &str,
    quantity: Quantity,
    lines: &[Line],
) -> ChartResult {
    let px = |v: f64| (v * dpr).round() as u32;
    let font = |v: f64| ("sans-serif", v * dpr).into_font();
    let values: Vec<f64> = lines.iter().flat_map(|l| l.2.iter().map(|p| p.1)).collect();
    let unit = panel_unit(quantity, &values);
    let legend: Vec<LegendItem> = lines
        .iter()
        .map(|(label, color, _)| LegendItem::new(label.clone(), *color, Mark::Line))
        .collect();
    let area = titled_with_legend(area, title, 13.0, &legend, dpr)?;
    let x = Axis::linear().coord(&[0.0, t_end.max(1e-3)], true, None, 1.0);
    let y = Axis::linear().coord(&values, true, None, unit.factor);
    let mut chart = ChartBuilder::on(&area)
        .margin(px(8.0))
        .x_label_area_size(px(28.0))
        .y_label_area_size(px(64.0))
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    let y_fmt = |v: &f64| short_number(*v * unit.factor);
    let x_fmt = |v: &f64| short_number(*v);
    let y_desc = if unit.suffix.is_empty() {
        String::new()
    } else {
        format!("[{}]", unit.suffix.trim())
    };
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(GRID)
        .x_desc("seconds into the epoch")
        .y_desc(y_desc)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(font(11.0))
        .axis_desc_style(font(11.0))
        .draw()
        .map_err(err)?;
    for (_, color, pts) in lines {
        chart
            .draw_series(LineSeries::new(
                pts.iter().copied(),
                color.stroke_width(px(1.5).max(1)),
            ))
            .map_err(err)?;
    }
    Ok(())
}

/// A panel's unit: bytes in IEC units, anything else as counted.
fn panel_unit(quantity: Quantity, values: &[f64]) -> Unit {
    match quantity {
        Quantity::Bytes => Unit::for_values(Quantity::Bytes, values),
        _ => Unit {
            suffix: "",
            factor: 1.0,
            decimals: 1,
            significant: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::charts::test_gen::Gen;

    fn whole_run(rank: Option<u32>, timeline: Timeline) -> Run {
        let phase = stallscope_bundle::Phase::Cold;
        Run {
            rank,
            timeline: Some(timeline),
            ..Run::new(format!("{rank:?}"), TimingMode::WholeRun, 0, 0, phase)
        }
    }

    /// Over generated timelines: the steps-per-second line, integrated
    /// over its intervals, gives back the steps the counter advanced.
    #[test]
    fn step_rate_integrates_to_the_steps_done() {
        let mut g = Gen(0xC0FF_EE00_1234_5678);
        for _ in 0..300 {
            let n = 2 + g.next(200) as usize;
            let mut t = Timeline::default();
            let (mut ms, mut steps) = (0u32, 0u64);
            for _ in 0..n {
                t.t_ms.push(ms);
                t.steps.push(steps);
                ms += 1 + g.next(100) as u32;
                steps += g.next(50);
            }
            let rate = step_rate(&t);
            assert_eq!(rate.len(), n - 1);
            let total: f64 = rate
                .iter()
                .zip(t.t_ms.windows(2))
                .map(|((_, r), w)| r * (w[1] - w[0]) as f64 / 1e3)
                .sum();
            let want = (t.steps[n - 1] - t.steps[0]) as f64;
            assert!(
                (total - want).abs() < 1e-6 * want.max(1.0),
                "{total} vs {want}"
            );
        }
    }

    /// In a merged bundle only the lowest rank's runs are drawn; without
    /// ranks every run is.
    #[test]
    fn lowest_rank_is_drawn() {
        let t = || Timeline {
            t_ms: vec![0, 50],
            steps: vec![0, 5],
            host_cpu_cores: vec![1.0, 1.5],
            host_rss_bytes: vec![1, 2],
            gpu_not_available: Some("no NVML".into()),
            ..Default::default()
        };
        let ranked = Configuration::new("c", "c").with_runs(vec![
            whole_run(Some(3), t()),
            whole_run(Some(1), t()),
            whole_run(Some(2), t()),
        ]);
        assert_eq!(drawn_rank(&ranked), Some(1));
        assert_eq!(timeline_runs(&ranked).len(), 1);
        assert_eq!(gpu_not_available(&ranked).as_deref(), Some("no NVML"));
        let single = Configuration::new("c", "c")
            .with_runs(vec![whole_run(None, t()), whole_run(None, t())]);
        assert_eq!(timeline_runs(&single).len(), 2);
        assert_eq!(drawn_rank(&single), None);
        assert_eq!(
            panels(&timeline_runs(&single)).len(),
            3,
            "CPU, memory, steps/s"
        );
    }
}
