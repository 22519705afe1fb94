//! `stallscope job [OPTIONS] -- COMMAND [ARGS...]`: the arguments and the
//! printing. The job itself (its configurations, processes, records and
//! bundle) is the `stallscope-job` crate (docs/your-job.md).

use std::path::PathBuf;
use std::process::ExitCode;

use stallscope_core::STOP;
use stallscope_job::{JobEvents, JobOptions};

use super::finish::{exit_code, install_ctrlc, print_report};
use super::output::OutputArgs;
use super::progress;
use crate::report::text;

#[derive(Debug, clap::Args)]
pub struct JobArgs {
    /// Measured training steps (optimizer steps of the training thread) after the warm-up; the
    /// process then ends.
    #[arg(long, default_value_t = 50)]
    pub steps: u32,
    /// Training steps the script runs unmeasured first (kernel selection, worker start).
    #[arg(long, default_value_t = 10)]
    pub warmup: u32,
    /// Only for a loop that never steps an optimizer: the DataLoader whose loop is timed, by
    /// its index in the order loaders are first iterated.
    #[arg(long, default_value_t = 0)]
    pub loader: u32,
    /// Repeats of every configuration (ascending, descending, ascending order). With --sweep or
    /// --tune, more follow while a configuration straddles the noise floor (--max-repeats).
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
    /// With --sweep or --tune: repeats may grow to this many while the answer is not resolved
    /// (a ratio to your settings straddling the A/A noise floor).
    #[arg(long, default_value_t = 8)]
    pub max_repeats: u32,
    /// With --sweep or --tune: minutes the repeats may grow for.
    #[arg(long)]
    pub max_minutes: Option<f64>,
    /// Re-run with a DataLoader argument overridden: num_workers, prefetch_factor,
    /// persistent_workers, pin_memory, multiprocessing_context, in_order or batch_size
    /// (KEY=V1,V2,...; repeatable: every combination runs).
    #[arg(long)]
    pub sweep: Vec<String>,
    /// Choose a grid from the script's own DataLoader settings and the CPUs this process may
    /// use, run it beside your settings run twice (the A/A noise floor), recommend the cheapest
    /// setting faster beyond that floor and verify it by interleaved whole-run A/B pairs. When
    /// your settings crash, search for ones that run (docs/your-job.md). Implies --replay.
    #[arg(long, conflicts_with = "sweep")]
    pub tune: bool,
    /// Also run the script's own settings with the window fed from batches cached in memory
    /// (the loader free): the ceiling step and the stall by difference.
    #[arg(long)]
    pub replay: bool,
    /// Memory the replay's cached batches may take (it caches up to --steps batches), MiB.
    #[arg(long, default_value_t = 512)]
    pub replay_mib: u64,
    /// Whole-run A/B pairs that verify --tune's recommendation (in the order AB, BA, AB, ...).
    #[arg(long, default_value_t = 3)]
    pub verify_pairs: u32,
    /// Seconds one process may run before it is stopped (a hang, or no DataLoader).
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// Output folder; the bundle is <OUT>/bundle.json (default out/<bundle id>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Leave the command's arguments out of the bundle (to share it).
    #[arg(long)]
    pub redact_args: bool,
    /// Progress lines on stderr even when it is not a terminal.
    #[arg(long)]
    pub progress: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// The training command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

impl JobArgs {
    fn options(&self) -> JobOptions {
        JobOptions {
            command: self.command.clone(),
            steps: self.steps,
            warmup: self.warmup,
            loader: self.loader,
            repeats: self.repeats,
            max_repeats: self.max_repeats.max(self.repeats),
            max_minutes: self.max_minutes,
            sweep: self.sweep.clone(),
            tune: self.tune,
            replay: self.replay,
            replay_mib: self.replay_mib,
            verify_pairs: self.verify_pairs,
            timeout: self.timeout,
            out: self.out.clone(),
            redact_args: self.redact_args,
            command_line: std::env::args().collect(),
        }
    }
}

/// A job's notes on stderr, wrapped to 100 columns.
struct Notes;

impl JobEvents for Notes {
    fn note(&self, t: &str) {
        eprintln!("{}", text::wrap(t, "", "  ", text::WIDTH).trim_end());
    }
}

pub fn run(args: &JobArgs) -> anyhow::Result<ExitCode> {
    install_ctrlc()?;
    let progress = progress::Lines::new(args.progress);
    let o = stallscope_job::run(&args.options(), &STOP, &progress, &Notes)?;
    print_report(&o.bundle, &o.path, args.output.style());
    if let Some(line) = &o.ranks {
        eprint!("{}", text::wrap(line, "", "  ", text::WIDTH));
    }
    Ok(exit_code(o.interrupted, o.failures))
}
