//! Analysis shared by the CLI and the browser: summaries over repeats, metric
//! extraction keyed by timing mode and phase (so the two modes are never
//! mixed), comparison tables, sweet spots, stall attribution, verdicts and
//! the OOM plausibility check, the per-rank analysis of a merged multi-rank
//! bundle, its pooled figures and scaling efficiency, the CPU cost of a
//! configuration, a `stallscope job` bundle digested (its recommendation,
//! replay ceiling and memory per worker), the noise floor of an A/A pair and
//! the verdicts it allows, forecasts of what fits, and the causes of
//! crashes.

mod change;
mod compare;
mod contention;
mod cost;
mod crash;
mod crashed;
mod floored;
mod forecast;
pub(crate) mod forecast_text;
mod job_text;
mod key;
mod metric;
mod noise;
mod pooled;
mod rank_columns;
mod ranks;
mod replay_text;
mod run_cost;
mod scaling;
mod stages;
mod summary;
mod table;
mod tune;
mod units;
mod verdict;
mod your_job;

pub use change::change_of;
pub use compare::*;
pub use contention::{RECONCILE_POINTS, Reconciliation, reconcile};
pub use cost::*;
pub use crash::*;
pub use crashed::fallback_pick;
pub use forecast::*;
pub use job_text::job_closing;
pub use key::*;
pub use metric::*;
pub use noise::*;
pub use pooled::*;
pub use rank_columns::*;
pub use ranks::*;
pub use replay_text::{script_whole_run, sentence as replay_sentence};
pub use scaling::*;
pub use stages::*;
pub use summary::*;
pub use table::*;
pub use tune::*;
pub use units::*;
pub use verdict::*;
pub use your_job::*;
