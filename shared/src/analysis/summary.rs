//! Summary statistics over repeated measurements: median, min, max, IQR and
//! the noise flag.

/// A configuration is flagged noisy when (max − min) / median exceeds this
/// (methodology.md: "flag a configuration whose spread is wide").
pub const NOISE_THRESHOLD: f64 = 0.10;

/// Statistics of a handful of repeated measurements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// First and third quartiles (linear interpolation between order statistics).
    pub q1: f64,
    pub q3: f64,
    /// (max − min) / median.
    pub spread: f64,
    /// `spread` above [`NOISE_THRESHOLD`].
    pub noisy: bool,
}

impl Summary {
    /// Summarize finite values; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = quantile_sorted(&v, 0.5);
        let min = v[0];
        let max = v[n - 1];
        let mean = v.iter().sum::<f64>() / n as f64;
        let spread = if median != 0.0 {
            (max - min) / median.abs()
        } else {
            0.0
        };
        Some(Summary {
            n,
            median,
            min,
            max,
            mean,
            q1: quantile_sorted(&v, 0.25),
            q3: quantile_sorted(&v, 0.75),
            spread,
            noisy: n > 1 && spread > NOISE_THRESHOLD,
        })
    }

    /// Interquartile range.
    pub fn iqr(&self) -> f64 {
        self.q3 - self.q1
    }
}

/// Quantile of sorted values by linear interpolation (q in 0..=1).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 1 {
        return sorted[0];
    }
    let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Median of values (convenience).
pub fn median(values: &[f64]) -> Option<f64> {
    Summary::of(values).map(|s| s.median)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn noise_flag_follows_spread_over_median() {
        let calm = Summary::of(&[100.0, 104.0, 109.0]).unwrap();
        assert!(!calm.noisy, "spread 9% is not noisy");
        let noisy = Summary::of(&[100.0, 104.0, 111.0]).unwrap();
        assert!(noisy.noisy, "spread 11% is noisy");
        assert!((noisy.spread - 0.11 / 1.04).abs() < 1e-12);
    }

    #[test]
    fn quartiles_interpolate() {
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!((s.q1, s.median, s.q3), (2.0, 3.0, 4.0));
        assert_eq!(s.iqr(), 2.0);
        assert_eq!((s.min, s.max, s.mean), (1.0, 5.0, 3.0));
    }

    #[test]
    fn non_finite_values_are_ignored() {
        let s = Summary::of(&[f64::NAN, 2.0, f64::INFINITY]).unwrap();
        assert_eq!(s.n, 1);
        assert_eq!(s.median, 2.0);
    }
}
