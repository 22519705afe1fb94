//! `stallscope compare BASE NEW`: whole-run throughput side by side, in the
//! manner of torch.utils.benchmark.Compare; exit 1 when NEW is slower than
//! BASE beyond the threshold on any configuration (for CI gating), exit 2
//! when a bundle cannot be read. A merged bundle is compared as its job;
//! bundles of different world sizes add their scaling efficiency.

use std::path::PathBuf;
use std::process::ExitCode;

use stallscope_bundle::analysis::{compare_bundles, compare_scaling};

use super::output::OutputArgs;
use crate::report;
use stallscope_core::read_bundle_file;

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The baseline bundle.
    pub base: PathBuf,
    /// The bundle compared against it.
    pub new: PathBuf,
    /// Regression threshold in percent of whole-run throughput.
    #[arg(long, default_value_t = 5.0)]
    pub threshold: f64,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Shorthand for `--format json`.
    #[arg(long, conflicts_with = "wide")]
    pub json: bool,
}

pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    if !(args.threshold.is_finite() && args.threshold >= 0.0) {
        anyhow::bail!(
            "--threshold {}: expected a non-negative percentage, e.g. 5",
            args.threshold
        );
    }
    let read = |p: &std::path::Path| match read_bundle_file(p) {
        Ok(b) => Some(b),
        Err(e) => {
            for p in e.paragraphs() {
                eprintln!("{p}");
            }
            None
        }
    };
    let (Some(base), Some(new)) = (read(&args.base), read(&args.new)) else {
        return Ok(ExitCode::from(2));
    };
    let c = compare_bundles(&base, &new, args.threshold);
    let style = if args.json {
        report::Style::Json
    } else {
        args.output.style()
    };
    let scaling = compare_scaling(&base, &new);
    crate::out!(
        "{}",
        report::render_comparison_with_scaling(&c, scaling.as_ref(), &args.base, &args.new, style)
    );
    let regressions = c.regressions();
    if regressions.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        let message = format!(
            "{} configuration(s) slower than BASE by more than {}% in whole-run throughput: {}",
            regressions.len(),
            args.threshold,
            regressions
                .iter()
                .map(|(e, r)| format!("{}/{}", e.experiment_id, r.config_id))
                .collect::<Vec<_>>()
                .join(", ")
        );
        eprint!(
            "{}",
            report::text::wrap(&message, "", "  ", report::text::WIDTH)
        );
        Ok(ExitCode::from(1))
    }
}
