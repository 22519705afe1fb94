//! An experiment's noise floor (format 1.5): one configuration run twice,
//! interleaved with the rest (an A/A pair); how far apart its two copies
//! land in a repeat is what a difference must exceed to be one. The rule is
//! in `analysis::noise` and docs/methodology.md.

use serde::{Deserialize, Serialize};

format_type! {
    /// The spread of an A/A pair: `b` is `a` run again (in a job, `script`
    /// and `script-again`).
    pub struct NoiseFloor {
        pub a: String,
        pub b: String,
        /// Per repeat, in repeat order: `b`'s whole-run samples/s over `a`'s
        /// (repeats that lack either are left out).
        pub rate_ratios: Vec<f64>,
        /// The floor as a share: ratios within [1 ÷ (1 + f), 1 + f] are
        /// noise. The largest of `rate_ratios` and their reciprocals, less
        /// one, and never below 2%.
        pub rate_floor: f64,
        /// The same of CPU-seconds per 1,000 samples, when both have them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub cpu_ratios: Vec<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cpu_floor: Option<f64>,
    }
}
