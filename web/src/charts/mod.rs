//! Charts drawn with plotters on a canvas: the canvas' backing store is sized
//! to its CSS size × `devicePixelRatio` so lines and text stay sharp on
//! high-DPI screens, and every size below is given in CSS pixels and scaled.
//!
//! Axes are plain `f64` ranges with explicit key points; a wide range
//! (largest / smallest ≥ 16) is drawn in log₂ space with labels in the
//! original values, so every chart has one coordinate type.

pub mod epochs;
pub mod rank_heat;
pub mod rates;
pub mod stages;
pub mod steps;
pub mod throughput;
pub mod timeline;

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters_canvas::CanvasBackend;
use web_sys::HtmlCanvasElement;

/// A chart that could not be drawn, in words.
pub type ChartResult = Result<(), String>;

/// One coordinate type for every axis: an `f64` range whose mesh lines and
/// labels sit at the given key points.
#[derive(Clone)]
pub struct AxisCoord {
    inner: RangedCoordf64,
    keys: Vec<f64>,
}

impl AxisCoord {
    pub fn new(range: Range<f64>, keys: Vec<f64>) -> AxisCoord {
        AxisCoord {
            inner: range.into(),
            keys,
        }
    }
}

impl Ranged for AxisCoord {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.keys.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.inner.range()
    }
}

pub const SERIES_BLUE: RGBColor = RGBColor(31, 100, 180);
pub const MEMORY_ORANGE: RGBColor = RGBColor(220, 120, 20);
pub const SWEET_GREEN: RGBColor = RGBColor(20, 150, 70);
pub const WAIT_RED: RGBColor = RGBColor(205, 60, 60);
pub const TRANSFER_PURPLE: RGBColor = RGBColor(130, 90, 190);
pub const COMPUTE_SLATE: RGBColor = RGBColor(90, 120, 150);
pub const COMM_TEAL: RGBColor = RGBColor(40, 150, 140);
pub const GRID: RGBColor = RGBColor(225, 225, 225);

/// The canvas prepared for drawing, and the scale from CSS to device pixels.
pub struct Surface {
    pub backend: CanvasBackend,
    pub dpr: f64,
}

impl Surface {
    /// Size the backing store to the canvas' CSS box × devicePixelRatio.
    pub fn new(canvas: &HtmlCanvasElement) -> Result<Surface, String> {
        let dpr = web_sys::window()
            .map(|w| w.device_pixel_ratio())
            .unwrap_or(1.0)
            .max(1.0);
        let css_w = canvas.client_width().max(320) as f64;
        let css_h = canvas.client_height().max(200) as f64;
        canvas.set_width((css_w * dpr).round() as u32);
        canvas.set_height((css_h * dpr).round() as u32);
        let backend = CanvasBackend::with_canvas_object(canvas.clone())
            .ok_or_else(|| "the browser gave no 2D context for the chart".to_string())?;
        Ok(Surface { backend, dpr })
    }
}

/// How a legend entry is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mark {
    /// A line (a series).
    Line,
    /// A dashed line (a threshold).
    Dashed,
    /// A filled box (bars).
    Box,
    /// A short vertical stroke (a marker line, a min–max bar).
    Tick,
}

/// One legend entry: drawn above the plot, never over it.
#[derive(Debug, Clone)]
pub struct LegendItem {
    pub label: String,
    pub color: RGBColor,
    pub mark: Mark,
}

impl LegendItem {
    pub fn new(label: impl Into<String>, color: RGBColor, mark: Mark) -> LegendItem {
        LegendItem {
            label: label.into(),
            color,
            mark,
        }
    }
}

type Area = DrawingArea<CanvasBackend, plotters::coord::Shift>;

/// The canvas laid out: the caption on top, the legend in rows on its own
/// strip under it, and the rest for the plot — so a legend never covers a
/// line or a bar. The axes' titles go on the canvas as `data-axes` (for
/// readers and the browser checks), in the words the chart draws them.
pub fn frame(
    canvas: &HtmlCanvasElement,
    root: &Area,
    caption: &str,
    legend: &[LegendItem],
    axes: &[&str],
    dpr: f64,
) -> Result<Area, String> {
    let _ = canvas.set_attribute("data-axes", &axes.join(" | "));
    let _ = canvas.set_attribute(
        "data-legend",
        &legend
            .iter()
            .map(|l| l.label.as_str())
            .collect::<Vec<_>>()
            .join(" | "),
    );
    titled_with_legend(root, caption, 15.0, legend, dpr)
}

/// [`frame`] without the canvas' attributes: a caption of `size` px, the
/// legend's rows under it, the rest returned (a panel of several on one
/// canvas).
pub fn titled_with_legend(
    root: &Area,
    caption: &str,
    size: f64,
    legend: &[LegendItem],
    dpr: f64,
) -> Result<Area, String> {
    let font = |v: f64| ("sans-serif", v * dpr).into_font();
    let area = root.titled(caption, font(size)).map_err(err)?;
    if legend.is_empty() {
        return Ok(area);
    }
    let px = |v: f64| (v * dpr).round() as i32;
    let (width, _) = area.dim_in_pixel();
    let label_font = font(12.0);
    let label_style: TextStyle = label_font.clone().into();
    // Lay the entries out in rows, left to right.
    let (mut x, mut row) = (px(70.0), 0);
    let mut placed = Vec::new();
    for item in legend {
        let (w, _) = area
            .estimate_text_size(&item.label, &label_style)
            .map_err(err)?;
        let span = px(22.0) + w as i32;
        if x + span > width as i32 - px(12.0) && x > px(70.0) {
            (x, row) = (px(70.0), row + 1);
        }
        placed.push((item, x, row));
        x += span + px(18.0);
    }
    let strip = px(18.0) * (row + 1) + px(6.0);
    let (top, rest) = area.split_vertically(strip);
    for (item, x, row) in placed {
        let y = px(9.0) + row * px(18.0);
        draw_mark(&top, item, (x, y), dpr)?;
        top.draw(&Text::new(
            item.label.clone(),
            (x + px(22.0), y - px(7.0)),
            label_font.clone(),
        ))
        .map_err(err)?;
    }
    Ok(rest)
}

/// A legend entry's swatch at `(x, y)` (its vertical centre).
fn draw_mark(area: &Area, item: &LegendItem, (x, y): (i32, i32), dpr: f64) -> ChartResult {
    let px = |v: f64| (v * dpr).round() as i32;
    let c = item.color;
    let width = px(2.0).max(1) as u32;
    match item.mark {
        Mark::Line => area.draw(&PathElement::new(
            vec![(x, y), (x + px(16.0), y)],
            c.stroke_width(width),
        )),
        Mark::Dashed => {
            for k in 0..3 {
                let x0 = x + k * px(6.0);
                area.draw(&PathElement::new(
                    vec![(x0, y), (x0 + px(3.0), y)],
                    c.stroke_width(width),
                ))
                .map_err(err)?;
            }
            Ok(())
        }
        Mark::Box => area.draw(&Rectangle::new(
            [(x, y - px(5.0)), (x + px(14.0), y + px(5.0))],
            c.filled(),
        )),
        Mark::Tick => area.draw(&PathElement::new(
            vec![(x + px(7.0), y - px(6.0)), (x + px(7.0), y + px(6.0))],
            c.stroke_width(width),
        )),
    }
    .map_err(err)
}

/// A throughput axis' title: `samples/s` says its unit itself (never
/// `samples/s [s]`); another metric gets its unit in brackets
/// (`bandwidth [MiB/s]`).
pub fn rate_title(
    metric: stallscope_bundle::analysis::Metric,
    unit: &stallscope_bundle::analysis::Unit,
) -> String {
    if unit.suffix == "/s" || unit.suffix.is_empty() {
        metric.label().to_string()
    } else {
        format!("{} [{}]", metric.label(), unit.suffix)
    }
}

/// Category labels cut with `…` to what fits under `n` bars side by side
/// on a canvas `css_width` wide (12 px sans-serif: about 6.5 px a
/// character), so neighbours never run into each other; the table beside
/// the chart has the full labels.
pub fn fit_labels(labels: &[String], css_width: f64) -> Vec<String> {
    let n = labels.len().max(1) as f64;
    let room = (((css_width - 100.0) / n) / 6.5).floor().max(6.0) as usize;
    labels
        .iter()
        .map(|l| {
            if l.chars().count() <= room {
                l.clone()
            } else {
                let cut: String = l.chars().take(room - 1).collect();
                format!("{}…", cut.trim_end())
            }
        })
        .collect()
}

/// Turn any plotters error into text.
pub fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("drawing failed: {e:?}")
}

/// An axis: linear, or log₂ when the values span a wide range.
#[derive(Debug, Clone, Copy)]
pub struct Axis {
    pub log: bool,
}

impl Axis {
    /// Log when every value is positive and the largest is ≥ 16× the smallest.
    pub fn for_values(values: &[f64]) -> Axis {
        let (lo, hi) = bounds(values);
        Axis {
            log: lo > 0.0 && hi / lo >= 16.0,
        }
    }

    pub fn linear() -> Axis {
        Axis { log: false }
    }

    /// Data value to drawing coordinate.
    pub fn fwd(&self, v: f64) -> f64 {
        if self.log {
            v.max(f64::MIN_POSITIVE).log2()
        } else {
            v
        }
    }

    /// Drawing coordinate to data value.
    pub fn back(&self, v: f64) -> f64 {
        if self.log { v.exp2() } else { v }
    }

    /// A coordinate range covering `values`, padded, with key points: the
    /// given `ticks` (data values) or, when `None`, ones that are round in
    /// the displayed unit (value × `unit_factor`).
    pub fn coord(
        &self,
        values: &[f64],
        include_zero: bool,
        ticks: Option<Vec<f64>>,
        unit_factor: f64,
    ) -> AxisCoord {
        let (mut lo, mut hi) = bounds(values);
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        let (mut a, mut b) = if self.log {
            (self.fwd(lo), self.fwd(hi))
        } else {
            (if include_zero { lo.min(0.0) } else { lo }, hi)
        };
        if (b - a).abs() < 1e-12 {
            a -= 0.5;
            b += 0.5;
        }
        let pad = (b - a) * 0.06;
        let (a, b) = if !self.log && include_zero && a >= 0.0 {
            (0.0, b + pad)
        } else {
            (a - pad, b + pad)
        };
        let keys = match ticks {
            Some(t) => t
                .into_iter()
                .map(|v| self.fwd(v))
                .filter(|v| *v >= a && *v <= b)
                .collect(),
            None if self.log => (a.ceil() as i64..=b.floor() as i64)
                .map(|k| k as f64)
                .collect(),
            None => nice_ticks(a * unit_factor, b * unit_factor)
                .into_iter()
                .map(|t| t / unit_factor)
                .collect(),
        };
        AxisCoord::new(a..b, keys)
    }
}

/// Smallest and largest finite values.
pub fn bounds(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        })
}

/// About six round ticks between `a` and `b`.
pub fn nice_ticks(a: f64, b: f64) -> Vec<f64> {
    let span = (b - a).abs().max(f64::MIN_POSITIVE);
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 7.0)
        .unwrap_or(10.0 * mag);
    let mut t = (a / step).ceil() * step;
    let mut out = Vec::new();
    while t <= b + step * 1e-9 && out.len() < 20 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// Compact number for axis labels: 16k, 1.5M, 0.25.
pub fn short_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", trim(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_ticks(0.0, 10.0), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(
            nice_ticks(0.0, 38_000.0),
            [0.0, 10_000.0, 20_000.0, 30_000.0]
        );
    }

    #[test]
    fn wide_ranges_go_log() {
        assert!(Axis::for_values(&[32.0, 8192.0]).log);
        assert!(!Axis::for_values(&[64.0, 256.0]).log);
        assert!(
            !Axis::for_values(&[0.0, 8192.0]).log,
            "zero cannot be on a log axis"
        );
        let a = Axis::for_values(&[32.0, 8192.0]);
        assert!((a.back(a.fwd(1024.0)) - 1024.0).abs() < 1e-9);
    }

    #[test]
    fn category_labels_fit_their_bars() {
        let labels: Vec<String> = [
            "native, in loop (0 workers)",
            "spdl, concurrency 2 (processes)",
        ]
        .map(String::from)
        .to_vec();
        let wide = fit_labels(&labels, 1100.0);
        assert_eq!(wide, labels);
        let narrow = fit_labels(
            &[labels.clone(), labels.clone(), labels.clone(), labels].concat(),
            1100.0,
        );
        assert!(narrow.iter().all(|l| l.chars().count() <= 19), "{narrow:?}");
        assert!(narrow[0].ends_with('…'));
    }

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(short_number(16_062.0), "16.1k");
        assert_eq!(short_number(2_500_000.0), "2.5M");
        assert_eq!(short_number(0.25), "0.25");
        assert_eq!(short_number(256.0), "256");
    }
}

/// xorshift64: generated inputs for the charts' tests, without a dependency.
#[cfg(test)]
pub(crate) mod test_gen {
    pub(crate) struct Gen(pub(crate) u64);
    impl Gen {
        pub(crate) fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below.max(1)
        }
    }
}
