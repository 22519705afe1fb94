//! Units chosen once per column (as torch.utils.benchmark.Compare does) and
//! number formatting shared by the terminal and the browser.

use crate::analysis::metric::Quantity;

/// A display unit: value × `factor`, shown with `decimals` and `suffix`,
/// or, when `significant` is set, each value with that many significant
/// digits (a column whose values span orders of magnitude in one unit).
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub suffix: &'static str,
    pub factor: f64,
    pub decimals: usize,
    pub significant: Option<usize>,
}

impl Unit {
    /// Pick one unit for a column from its typical (median) magnitude.
    pub fn for_values(quantity: Quantity, values: &[f64]) -> Unit {
        let typical = typical(values);
        match quantity {
            Quantity::Duration => Unit::time(typical),
            Quantity::Rate => {
                if typical >= 100.0 {
                    Unit {
                        suffix: "/s",
                        factor: 1.0,
                        decimals: 0,
                        significant: None,
                    }
                } else {
                    Unit {
                        suffix: "/s",
                        factor: 1.0,
                        decimals: 2,
                        significant: None,
                    }
                }
            }
            // IEC, as every byte figure: MiB/s and GiB/s.
            Quantity::Bandwidth => {
                if typical >= GIB {
                    Unit {
                        suffix: "GiB/s",
                        factor: 1.0 / GIB,
                        decimals: 2,
                        significant: None,
                    }
                } else {
                    Unit {
                        suffix: "MiB/s",
                        factor: 1.0 / MIB,
                        decimals: 1,
                        significant: None,
                    }
                }
            }
            Quantity::Bytes => {
                if typical >= 10.0 * GIB {
                    Unit {
                        suffix: "GiB",
                        factor: 1.0 / GIB,
                        decimals: 2,
                        significant: None,
                    }
                } else {
                    Unit {
                        suffix: "MiB",
                        factor: 1.0 / MIB,
                        decimals: 1,
                        significant: None,
                    }
                }
            }
            Quantity::Share => Unit {
                suffix: "%",
                factor: 100.0,
                decimals: 1,
                significant: None,
            },
            Quantity::Count => Unit {
                suffix: "",
                factor: 1.0,
                decimals: 0,
                significant: None,
            },
            Quantity::CpuTime => Unit::time(typical).cpu(),
            Quantity::Cores => Unit {
                suffix: "cores",
                factor: 1.0,
                decimals: 2,
                significant: None,
            },
        }
    }

    /// One unit for several columns of one table, from the geometric mean
    /// of their typical values (an epoch of 3.7 s beside a step of 2 ms
    /// reads in ms; the median would pick s and show the step as 0.00199 s).
    pub fn for_columns(quantity: Quantity, typicals: &[f64]) -> Unit {
        let logs: Vec<f64> = typicals
            .iter()
            .filter(|t| t.is_finite() && **t > 0.0)
            .map(|t| t.ln())
            .collect();
        let centre = if logs.is_empty() {
            0.0
        } else {
            (logs.iter().sum::<f64>() / logs.len() as f64).exp()
        };
        Unit::for_values(quantity, &[centre])
    }

    /// The median magnitude of the finite values (0 for none).
    pub fn typical_of(values: &[f64]) -> f64 {
        typical(values)
    }

    /// The time unit for a typical value in seconds: s, ms or µs.
    fn time(typical: f64) -> Unit {
        let (suffix, factor, decimals) = if typical >= 1.0 {
            ("s", 1.0, 3)
        } else if typical >= 1e-3 {
            ("ms", 1e3, 2)
        } else {
            ("µs", 1e6, 1)
        };
        Unit {
            suffix,
            factor,
            decimals,
            significant: None,
        }
    }

    /// The same scale for CPU time: `CPU-s`, `CPU-ms`, `CPU-µs`.
    fn cpu(self) -> Unit {
        let (suffix, decimals) = match self.suffix {
            "s" => ("CPU-s", 2),
            "ms" => ("CPU-ms", 1),
            _ => ("CPU-µs", 0),
        };
        Unit {
            suffix,
            decimals,
            ..self
        }
    }

    /// This unit showing each value with three significant digits
    /// (`2,132 ms`, `119 ms`, `1.99 ms`, `0.0606 ms`): a column in a
    /// table-wide unit keeps its precision however its values spread.
    pub fn three_digits(&self) -> Unit {
        Unit {
            significant: Some(3),
            ..self.clone()
        }
    }

    /// The value in this unit, without the suffix (`16,062`, `3.735`).
    pub fn number(&self, value: f64) -> String {
        let v = value * self.factor;
        let decimals = match self.significant {
            Some(n) if v != 0.0 && v.is_finite() => {
                (n as i32 - 1 - v.abs().log10().floor() as i32).clamp(0, 6) as usize
            }
            Some(_) => 0,
            None => self.decimals,
        };
        group_thousands(&format!("{v:.decimals$}"))
    }

    /// The value with its suffix (`16,062/s`, `3.735 s`).
    pub fn show(&self, value: f64) -> String {
        let n = self.number(value);
        match self.suffix {
            "" => n,
            "%" | "/s" => format!("{n}{}", self.suffix),
            s => format!("{n} {s}"),
        }
    }
}

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = MIB * 1024.0;

/// The median magnitude of the finite values (0 for none).
fn typical(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .map(f64::abs)
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// Insert thousands separators into the integer part of a formatted number.
pub fn group_thousands(s: &str) -> String {
    let (sign, rest) = match s.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", s),
    };
    let (int, frac) = match rest.find('.') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if int.len() <= 3 || !int.bytes().all(|b| b.is_ascii_digit()) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + int.len() / 3);
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{sign}{out}{frac}")
}

/// Bytes for people: `106.2 MiB`, `3.98 GiB`.
pub fn show_bytes(bytes: f64) -> String {
    if bytes >= GIB {
        format!("{:.2} GiB", bytes / GIB)
    } else if bytes >= MIB {
        format!("{} MiB", group_thousands(&format!("{:.1}", bytes / MIB)))
    } else if bytes >= 1024.0 {
        format!("{:.1} KiB", bytes / 1024.0)
    } else {
        format!("{bytes:.0} B")
    }
}

/// A number for people, rounded: a whole number grouped (`1,024`), any
/// other with three significant digits (`2.19`, `0.00123`), trailing
/// zeros dropped.
pub fn show_number(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == x.trunc() && x.abs() < 1e15 {
        return group_thousands(&format!("{x:.0}"));
    }
    let a = x.abs();
    if a < 1e-6 {
        return format!("{x:.2e}");
    }
    let decimals = (2 - a.log10().floor() as i32).clamp(0, 9) as usize;
    let s = format!("{x:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    group_thousands(&s)
}

/// A setting's or parameter's value for people: numbers rounded with
/// [`show_number`], everything else as written.
pub fn show_value(v: &crate::format::ParamValue) -> String {
    match v {
        crate::format::ParamValue::Float(x) => show_number(*x),
        other => other.to_string(),
    }
}

/// A step's seconds for people, in milliseconds: `155 ms`, `0.99 ms`.
pub fn show_step_ms(s: f64) -> String {
    if s >= 0.1 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{:.2} ms", s * 1e3)
    }
}

/// A ratio for people: `1.07×`.
pub fn show_ratio(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}×")
    } else if r >= 10.0 {
        format!("{r:.1}×")
    } else if r >= 0.1 || r <= 0.0 || !r.is_finite() {
        format!("{r:.2}×")
    } else {
        // Two significant digits: 0.0039×, never 0.00×.
        let decimals = (1 - r.log10().floor() as i32).clamp(2, 9) as usize;
        format!("{r:.decimals$}×")
    }
}

/// A share for people: `34%`, `4.2%`.
pub fn show_percent(share: f64) -> String {
    let p = share * 100.0;
    if p.abs() >= 10.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_rounded_for_reading() {
        assert_eq!(show_number(2.192727592357002), "2.19");
        assert_eq!(show_number(0.001), "0.001");
        assert_eq!(show_number(0.0012345), "0.00123");
        assert_eq!(show_number(1024.0), "1,024");
        assert_eq!(show_number(32458.99), "32,459");
        assert_eq!(show_number(0.5), "0.5");
        assert_eq!(show_number(1.5e-9), "1.50e-9");
    }

    #[test]
    fn small_ratios_keep_two_digits() {
        assert_eq!(show_ratio(0.0039), "0.0039×");
        assert_eq!(show_ratio(0.05), "0.050×");
        assert_eq!(show_ratio(0.52), "0.52×");
        assert_eq!(show_ratio(2.07), "2.07×");
        assert_eq!(show_ratio(253.4), "253×");
    }

    #[test]
    fn thousands() {
        assert_eq!(group_thousands("16062"), "16,062");
        assert_eq!(group_thousands("1234567.891"), "1,234,567.891");
        assert_eq!(group_thousands("-1000"), "-1,000");
        assert_eq!(group_thousands("999"), "999");
    }

    #[test]
    fn small_values_keep_three_digits_in_a_larger_unit() {
        let ms = Unit::for_values(Quantity::Duration, &[0.0117]).three_digits();
        assert_eq!(ms.show(6.06e-5), "0.0606 ms");
        assert_eq!(ms.show(0.0117), "11.7 ms");
        assert_eq!(ms.show(0.00199), "1.99 ms");
        assert_eq!(ms.show(0.11922), "119 ms");
        assert_eq!(ms.show(2.1317506), "2,132 ms");
        assert_eq!(ms.show(0.0), "0 ms");
        let typical = [3.735, 0.00199];
        assert_eq!(Unit::for_columns(Quantity::Duration, &typical).suffix, "ms");
    }

    #[test]
    fn one_unit_per_column() {
        let u = Unit::for_values(Quantity::Duration, &[0.00199, 0.00735, 0.02739]);
        assert_eq!(u.suffix, "ms");
        assert_eq!(u.show(0.00199), "1.99 ms");
        let u = Unit::for_values(Quantity::Bytes, &[74_134_733.0, 111_358_771.0]);
        assert_eq!(u.show(111_358_771.0), "106.2 MiB");
        let u = Unit::for_values(Quantity::Rate, &[16062.0, 37332.0]);
        assert_eq!(u.show(16062.0), "16,062/s");
        let u = Unit::for_values(Quantity::CpuTime, &[0.0421, 0.2]);
        assert_eq!(u.show(0.0421), "42.1 CPU-ms");
        let u = Unit::for_values(Quantity::CpuTime, &[1.5, 2.0]);
        assert_eq!(u.show(1.5), "1.50 CPU-s");
        let u = Unit::for_values(Quantity::Bandwidth, &[3.0 * GIB]);
        assert_eq!(u.show(3.0 * GIB), "3.00 GiB/s");
        let u = Unit::for_values(Quantity::Bandwidth, &[200.0 * MIB]);
        assert_eq!(u.show(200.0 * MIB), "200.0 MiB/s");
        let u = Unit::for_values(Quantity::Cores, &[1.94]);
        assert_eq!(u.show(1.94), "1.94 cores");
    }
}
