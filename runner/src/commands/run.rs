//! `stallscope run`: load a suite, pick the back end (libtorch on `auto`,
//! `cpu` or `cuda[:N]`, or wgpu), run it with a progress bar through
//! [`run_plan`], and print the report.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stallscope_bundle::TimingMode;

use super::finish::{exit_code, install_ctrlc, print_report};
use super::output::OutputArgs;
use crate::report::text;
use stallscope_core::{Backend, Finished, Progress, RunOptions, STOP, run_plan, seeds, suite};
use stallscope_torch::{DeviceCtx, DeviceRequest, TorchBackend};
use stallscope_wgpu::WgpuBackend;

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

struct Bar(ProgressBar);

impl Progress for Bar {
    fn epoch(
        &self,
        experiment: &str,
        configuration: &str,
        repeat: u32,
        mode: TimingMode,
        epoch: u32,
    ) {
        self.0.set_message(progress_message(
            experiment,
            configuration,
            repeat,
            mode,
            epoch,
        ));
    }
    fn epoch_done(&self) {
        self.0.inc(1);
    }
    fn planned(&self, epochs: u64) {
        self.0.inc_length(epochs);
    }
}

/// Characters of the progress message: with the bar's
/// [`PROGRESS_TEMPLATE`] (12 + counts up to 9999/9999 + eta 8 + spaces) the
/// line stays within 100 columns.
const PROGRESS_MESSAGE: usize = 64;
const PROGRESS_TEMPLATE: &str = "{bar:12} {pos}/{len} {eta_precise} {msg}";
// The bar's other fields at their widest: 12 + "9999/9999" + "00:00:00" + 3 spaces.
const _: () = assert!(12 + 9 + 8 + 3 + PROGRESS_MESSAGE <= text::WIDTH);

/// `loader w2-threads-pf2 repeat 3 diagnostic epoch 2`, the ids cut with `…`
/// when the whole would pass [`PROGRESS_MESSAGE`] characters.
fn progress_message(
    experiment: &str,
    configuration: &str,
    repeat: u32,
    mode: TimingMode,
    epoch: u32,
) -> String {
    let tail = format!(" repeat {repeat} {} epoch {epoch}", mode.as_str());
    let room = PROGRESS_MESSAGE.saturating_sub(text::width(&tail));
    format!(
        "{}{tail}",
        text::fit(&format!("{experiment} {configuration}"), room)
    )
}

pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let plan = suite::load(args.suite.as_deref(), args.preset.as_deref(), args.quick)?;
    // Ranks (torchrun, srun): this rank's share, and every rank joined.
    let flags = stallscope_core::ranks::MasterFlags {
        addr: args.master_addr.clone(),
        port: args.master_port,
    };
    let layout =
        stallscope_core::ranks::detect(&flags).context("reading the launcher's rank variables")?;
    let local_rank = layout.as_ref().map(|l| l.local_rank);
    // Before joining: a stop while the ranks meet is one message, not a kill.
    install_ctrlc()?;
    if let Some(layout) = layout {
        stallscope_core::ranks::start(
            layout,
            &plan.ranks,
            &STOP,
            &stallscope_torch::open_tcp_store,
        )
        .map_err(anyhow::Error::msg)?;
    }
    if let Some(p) = &args.python {
        stallscope_python::set_python(p.clone());
    }
    // The back end: wgpu, or libtorch on the device asked for.
    let wgpu;
    let device;
    let torch;
    let backend: &dyn Backend = if args.device == "wgpu" {
        wgpu = WgpuBackend::new()?;
        &wgpu
    } else {
        if let Some(n) = plan.torch_threads {
            stallscope_torch::set_torch_threads(n);
        }
        let request: DeviceRequest = args.device.parse()?;
        device = match (request, local_rank) {
            // Each rank on its own GPU (cuda:LOCAL_RANK) when CUDA is present.
            (DeviceRequest::Auto, Some(n)) => {
                DeviceCtx::for_local_rank(n, args.libtorch.as_deref())
            }
            // `--device cuda` under a launcher: this rank's GPU, strictly.
            (DeviceRequest::CudaLocal, Some(n)) => {
                DeviceCtx::open(DeviceRequest::Cuda(n), args.libtorch.as_deref())?
            }
            _ => DeviceCtx::open(request, args.libtorch.as_deref())?,
        };
        // FP32 with TF32 off, set explicitly and recorded.
        stallscope_torch::apply_run_settings().context("turning TF32 off")?;
        torch = TorchBackend {
            device: &device,
            data_dir: args.data_dir.as_deref(),
            seeds: seeds(&plan),
        };
        &torch
    };

    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(ProgressStyle::with_template(PROGRESS_TEMPLATE).expect("static template"));
    let progress = Bar(bar.clone());
    let options = RunOptions {
        out_dir: args.out.as_deref(),
        stop: &STOP,
        progress: &progress,
        inject_panic: std::env::var("STALLSCOPE_INJECT_PANIC").ok(),
    };
    let finished = run_plan(&plan, backend, &options);
    bar.finish_and_clear();
    stallscope_core::ranks::finish();
    let Finished {
        bundle,
        path,
        failures,
        interrupted,
    } = finished?;
    // Ranks: rank 0 prints the report; the others only where their bundle is.
    match stallscope_core::ranks::current().map(|r| (r.layout.rank, r.layout.world_size)) {
        None | Some((0, 1)) => print_report(&bundle, &path, args.output.style()),
        Some((0, world)) => {
            // Its figures are rank 0's share of the job, and say so.
            eprintln!(
                "rank 0 of {world}: the report below is rank 0's share of the job;\n  \
                 `stallscope merge {}` combines every rank's bundle",
                path.parent().unwrap_or(Path::new(".")).display()
            );
            print_report(&bundle, &path, args.output.style());
        }
        Some((rank, _)) => eprintln!("rank {rank}: bundle: {}", path.display()),
    }
    Ok(exit_code(interrupted, failures))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_line_fits_100_columns() {
        let long = "w2-processes-pf2-pers0-pin0-with-a-much-longer-name-than-any-preset";
        let msg = progress_message("loader", long, 3, TimingMode::Diagnostic, 12);
        assert!(text::width(&msg) <= PROGRESS_MESSAGE, "{msg}");
        assert!(msg.ends_with(" repeat 3 diagnostic epoch 12"), "{msg}");
        let short = progress_message("compute", "bs64", 1, TimingMode::WholeRun, 1);
        assert_eq!(short, "compute bs64 repeat 1 whole_run epoch 1");
    }
}
