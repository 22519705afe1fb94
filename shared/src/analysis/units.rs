//! Units chosen once per column (as torch.utils.benchmark.Compare does) and
//! number formatting shared by the terminal and the browser.

use crate::analysis::metric::Quantity;

/// A display unit: value × `factor`, shown with `decimals` and `suffix`.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub suffix: &'static str,
    pub factor: f64,
    pub decimals: usize,
}

impl Unit {
    /// Pick one unit for a column from its typical (median) magnitude.
    pub fn for_values(quantity: Quantity, values: &[f64]) -> Unit {
        let mut v: Vec<f64> = values
            .iter()
            .copied()
            .filter(|x| x.is_finite())
            .map(f64::abs)
            .collect();
        v.sort_by(|a, b| a.total_cmp(b));
        let typical = if v.is_empty() { 0.0 } else { v[v.len() / 2] };
        match quantity {
            Quantity::Duration => {
                if typical >= 1.0 {
                    Unit {
                        suffix: "s",
                        factor: 1.0,
                        decimals: 3,
                    }
                } else if typical >= 1e-3 {
                    Unit {
                        suffix: "ms",
                        factor: 1e3,
                        decimals: 2,
                    }
                } else {
                    Unit {
                        suffix: "µs",
                        factor: 1e6,
                        decimals: 1,
                    }
                }
            }
            Quantity::Rate => {
                if typical >= 100.0 {
                    Unit {
                        suffix: "/s",
                        factor: 1.0,
                        decimals: 0,
                    }
                } else {
                    Unit {
                        suffix: "/s",
                        factor: 1.0,
                        decimals: 2,
                    }
                }
            }
            Quantity::Bandwidth => {
                if typical >= 1e9 {
                    Unit {
                        suffix: "GB/s",
                        factor: 1e-9,
                        decimals: 2,
                    }
                } else {
                    Unit {
                        suffix: "MB/s",
                        factor: 1e-6,
                        decimals: 1,
                    }
                }
            }
            Quantity::Bytes => {
                if typical >= 10.0 * 1024.0 * 1024.0 * 1024.0 {
                    Unit {
                        suffix: "GiB",
                        factor: 1.0 / (1024.0 * 1024.0 * 1024.0),
                        decimals: 2,
                    }
                } else {
                    Unit {
                        suffix: "MiB",
                        factor: 1.0 / (1024.0 * 1024.0),
                        decimals: 1,
                    }
                }
            }
            Quantity::Share => Unit {
                suffix: "%",
                factor: 100.0,
                decimals: 1,
            },
            Quantity::Count => Unit {
                suffix: "",
                factor: 1.0,
                decimals: 0,
            },
            Quantity::CpuTime => {
                if typical >= 1.0 {
                    Unit {
                        suffix: "CPU-s",
                        factor: 1.0,
                        decimals: 2,
                    }
                } else {
                    Unit {
                        suffix: "CPU-ms",
                        factor: 1e3,
                        decimals: 1,
                    }
                }
            }
            Quantity::Cores => Unit {
                suffix: "cores",
                factor: 1.0,
                decimals: 2,
            },
        }
    }

    /// The value in this unit, without the suffix (`16,062`, `3.735`).
    pub fn number(&self, value: f64) -> String {
        group_thousands(&format!("{:.*}", self.decimals, value * self.factor))
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
    const MIB: f64 = 1024.0 * 1024.0;
    const GIB: f64 = MIB * 1024.0;
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
    } else {
        format!("{r:.2}×")
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
    fn thousands() {
        assert_eq!(group_thousands("16062"), "16,062");
        assert_eq!(group_thousands("1234567.891"), "1,234,567.891");
        assert_eq!(group_thousands("-1000"), "-1,000");
        assert_eq!(group_thousands("999"), "999");
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
        let u = Unit::for_values(Quantity::Cores, &[1.94]);
        assert_eq!(u.show(1.94), "1.94 cores");
    }
}
