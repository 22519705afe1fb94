//! Analysis shared by the CLI and the browser: summaries over repeats, metric
//! extraction keyed by timing mode and phase (so the two modes are never
//! mixed), comparison tables, sweet spots, stall attribution, verdicts and
//! the OOM plausibility check, the per-rank analysis of a merged multi-rank
//! bundle and the CPU cost of a configuration.

mod compare;
mod cost;
mod key;
mod metric;
mod ranks;
mod stages;
mod summary;
mod table;
mod units;
mod verdict;

pub use compare::*;
pub use cost::*;
pub use key::*;
pub use metric::*;
pub use ranks::*;
pub use stages::*;
pub use summary::*;
pub use table::*;
pub use units::*;
pub use verdict::*;
