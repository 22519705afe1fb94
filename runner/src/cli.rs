//! Command-line parsing (clap) and dispatch to the subcommands.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands;

#[derive(Debug, Parser)]
#[command(
    name = "stallscope",
    version,
    about = "Find where a training step waits — data loader, host-to-device copy, or model — and which loader settings fix it, at what memory cost."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check bundles against the format; every problem with its JSON path.
    Validate(ValidateArgs),
    /// Side-by-side table of two bundles; exit 1 on a whole-run regression beyond the threshold.
    Compare(CompareArgs),
    /// Run a suite (default: the quickstart preset) and write a result bundle.
    Run(RunArgs),
    /// Measure your own training command, unmodified: `stallscope job -- python train.py`.
    Job(JobArgs),
    /// Print a saved bundle's report again: the one `run` prints at its end.
    Report(ReportArgs),
    /// Print what the runner records about the machine and the software.
    Env(EnvArgs),
    /// Per-step timeline of a diagnostic run as Chrome trace-event JSON (for Perfetto).
    Trace(TraceArgs),
    /// Write a self-contained static site: the viewer, the bundles and an index.
    Site(SiteArgs),
    /// Serve a directory (an exported site) on 127.0.0.1.
    Serve(ServeArgs),
    /// Merge the per-rank bundles (`*.rank-*.json`) of a folder into one with a rank dimension.
    Merge(MergeArgs),
    /// The bare per-image function of a suite's image experiment on one thread (for benches).
    #[command(hide = true)]
    BareImages(BareImagesArgs),
}

#[derive(Debug, clap::Args)]
pub struct BareImagesArgs {
    /// The suite (TOML) whose loader experiment reads images.
    pub suite: PathBuf,
    /// The experiment's id (default: the first with an image source).
    #[arg(long)]
    pub experiment: Option<String>,
    /// Passes over the images (after one unreported), each alternating images without and with
    /// the stage clocks.
    #[arg(long, default_value_t = 4)]
    pub passes: u32,
    /// Override the suite's decoder: auto, libjpeg-turbo or zune-jpeg.
    #[arg(long)]
    pub decoder: Option<String>,
    /// Override the suite's scaled_decode.
    #[arg(long)]
    pub scaled_decode: Option<bool>,
}

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The folder holding the ranks' bundles (bundle.rank-0.json, bundle.rank-1.json, ...).
    pub dir: PathBuf,
    /// The merged bundle to write (default DIR/bundle.merged.json).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct SiteArgs {
    /// Bundle files (JSON); each is validated first, and nothing is written if one is bad.
    #[arg(required = true)]
    pub bundles: Vec<PathBuf>,
    /// The folder to write (new, empty, or a previous site).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The folder to serve.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The port on 127.0.0.1 (0 picks a free one; the URL is printed).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A suite file (TOML); without it, the preset named by --preset (default quickstart).
    pub suite: Option<PathBuf>,
    /// A preset suite (the files of fixtures/suites/): quickstart, fashionmnist-batch-sweep, transfer, ...
    #[arg(long, conflicts_with = "suite")]
    pub preset: Option<String>,
    /// auto (CUDA when present, else the CPU), cpu, cuda, cuda:N, or wgpu (any Vulkan/Metal/DX12 device).
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Output folder; the bundle is <OUT>/bundle.json (default out/<bundle id>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Apply each experiment's `quick` overrides (fewer sizes, samples, repeats).
    #[arg(long)]
    pub quick: bool,
    /// Folder holding libtorch_cuda.so (default: STALLSCOPE_LIBTORCH, then the installed PyTorch).
    #[arg(long)]
    pub libtorch: Option<PathBuf>,
    /// Folder with FashionMNIST IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte);
    /// without it, data of the same shape is generated and recorded as synthetic.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Python of the peer engines (pytorch, spdl); default: STALLSCOPE_PYTHON, then the
    /// environment `cargo xtask setup --peers` makes in the cache.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Ranks (torchrun, srun): rank 0's address, over MASTER_ADDR and SLURM_JOB_NODELIST.
    #[arg(long)]
    pub master_addr: Option<String>,
    /// Ranks: the store's port, over MASTER_PORT and the port derived from SLURM_JOB_ID.
    #[arg(long)]
    pub master_port: Option<u16>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub struct JobArgs {
    /// Measured steps of the job's DataLoader, after the warm-up; the process then ends.
    #[arg(long, default_value_t = 50)]
    pub steps: u32,
    /// Batches handed to the script unmeasured first (kernel selection, worker start).
    #[arg(long, default_value_t = 10)]
    pub warmup: u32,
    /// Which DataLoader to measure: its index in the order they are first iterated.
    #[arg(long, default_value_t = 0)]
    pub loader: u32,
    /// Repeats of every configuration (ascending, descending, ascending order).
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
    /// Re-run with a DataLoader argument overridden: num_workers, prefetch_factor,
    /// persistent_workers, pin_memory, multiprocessing_context, in_order or batch_size
    /// (KEY=V1,V2,...; repeatable: every combination runs).
    #[arg(long)]
    pub sweep: Vec<String>,
    /// Choose a grid from the script's own DataLoader settings and this machine's cores, run
    /// it, recommend the fastest whole-run setting (the cheapest within the noise) and verify it
    /// by interleaved whole-run A/B pairs (docs/your-job.md). Implies --replay.
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
    #[command(flatten)]
    pub output: OutputArgs,
    /// The training command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The bundle (JSON), e.g. out/<id>/bundle.json.
    pub bundle: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// How a report or comparison is printed.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Output format: `table` fits 100 columns (verdicts and key figures);
    /// markdown, csv and json hold every column.
    #[arg(long, value_enum, default_value_t = TableFormat::Table)]
    pub format: TableFormat,
    /// The full table (every column, with min–max) as aligned text, however wide.
    #[arg(long, conflicts_with = "format")]
    pub wide: bool,
}

impl OutputArgs {
    pub fn style(&self) -> crate::report::Style {
        use crate::report::Style;
        match self.format {
            TableFormat::Table if self.wide => Style::Wide,
            TableFormat::Table => Style::Compact,
            TableFormat::Markdown => Style::Markdown,
            TableFormat::Csv => Style::Csv,
            TableFormat::Json => Style::Json,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct EnvArgs {
    /// Print the bundle's `environment` object as JSON.
    #[arg(long)]
    pub json: bool,
    /// The device to describe: auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Folder holding libtorch_cuda.so.
    #[arg(long)]
    pub libtorch: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// The bundle (JSON).
    pub bundle: PathBuf,
    /// The diagnostic run: its id when unique, else EXPERIMENT/CONFIGURATION/RUN.
    #[arg(long)]
    pub run: String,
    /// The trace file to write (JSON).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Bundle files (JSON).
    #[arg(required = true)]
    pub bundles: Vec<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableFormat {
    Table,
    Markdown,
    Csv,
    Json,
}

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

/// Parse the command line, run the command, map errors to exit codes.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate(args) => commands::validate::run(&args),
        Command::Compare(args) => commands::compare::run(&args),
        Command::Run(args) => commands::run::run(&args),
        Command::Job(args) => commands::job::run(&args),
        Command::Report(args) => commands::report::run(&args),
        Command::Env(args) => commands::env::run(&args),
        Command::Trace(args) => commands::trace::run(&args),
        Command::Site(args) => commands::site::run(&args),
        Command::Serve(args) => commands::serve::run(&args),
        Command::Merge(args) => commands::merge::run(&args),
        Command::BareImages(args) => commands::bare::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
