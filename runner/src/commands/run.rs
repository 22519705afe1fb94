//! `stallscope run`: load a suite, pick the device, run every experiment with
//! a progress bar, write the bundle atomically after every configuration and
//! at the end, and print the comparison table of each experiment.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stallscope_bundle::{
    Bundle, Provenance, RunState, RunStatus, SchemaVersion, Seeds, SuiteRecord, TimingMode,
};

use crate::bundle_file::write_atomic;
use crate::cli::RunArgs;
use crate::device::{DeviceCtx, DeviceRequest};
use crate::experiments::{self, Outcome, Progress, RunCtx};
use crate::report::text;
use crate::{envinfo, report, suite};

/// Set by Ctrl-C; checked between steps.
pub(crate) static STOP: AtomicBool = AtomicBool::new(false);

/// Exit code when Ctrl-C stopped the run (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;
/// Exit code when some configuration failed (panic, error) but the run ended.
pub const EXIT_FAILURES: u8 = 1;

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
    if args.device == "wgpu" {
        return super::run_wgpu::run(&plan, args);
    }
    if let Some(n) = plan.torch_threads {
        tch::set_num_threads(n);
    }
    let request: DeviceRequest = args.device.parse()?;
    let device = DeviceCtx::open(request, args.libtorch.as_deref())?;
    // FP32 with TF32 off, set explicitly and recorded.
    envinfo::apply_run_settings().context("turning TF32 off")?;
    install_ctrlc()?;

    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(ProgressStyle::with_template(PROGRESS_TEMPLATE).expect("static template"));
    let progress = Bar(bar.clone());
    let options = RunOptions {
        out_dir: args.out.as_deref(),
        data_dir: args.data_dir.as_deref(),
        stop: &STOP,
        progress: &progress,
        inject_panic: std::env::var("STALLSCOPE_INJECT_PANIC").ok(),
    };
    let finished = run_plan(&plan, &device, &options);
    bar.finish_and_clear();
    let Finished {
        bundle,
        path,
        failures,
        interrupted,
    } = finished?;
    print_report(&bundle, &path, args.output.style());
    Ok(exit_code(interrupted, failures))
}

/// Where and how [`run_plan`] runs.
pub struct RunOptions<'a> {
    /// The bundle goes to `out_dir/bundle.json` (default `out/<bundle id>`),
    /// rewritten atomically after every unit.
    pub out_dir: Option<&'a Path>,
    pub data_dir: Option<&'a Path>,
    /// Set (by Ctrl-C) to stop after the current step.
    pub stop: &'a AtomicBool,
    pub progress: &'a dyn Progress,
    /// Test-only: panic inside this configuration.
    pub inject_panic: Option<String>,
}

/// What a finished (or interrupted) run left.
pub struct Finished {
    pub bundle: Bundle,
    pub path: PathBuf,
    pub failures: usize,
    pub interrupted: bool,
}

/// Run a validated plan on an opened device: every experiment through the
/// driver, the bundle saved after every unit and at the end. Printing is the
/// caller's.
pub fn run_plan(
    plan: &suite::Plan,
    device: &DeviceCtx,
    options: &RunOptions,
) -> anyhow::Result<Finished> {
    let seeds = Seeds {
        weights: plan.seed,
        shuffle: plan.seed,
        data: plan.data_seed,
    };
    let mut environment = envinfo::environment(device);
    environment.suite = Some(SuiteRecord {
        name: plan.name.clone(),
        path: plan.path.as_ref().map(|p| p.display().to_string()),
        toml: plan.toml.clone(),
    });
    environment.seeds = Some(seeds);

    let (created_at, id) = bundle_id();
    let out_dir = options
        .out_dir
        .map_or_else(|| PathBuf::from("out").join(&id), Path::to_path_buf);
    let path = out_dir.join("bundle.json");
    let rc = RunCtx {
        device,
        stop: options.stop,
        data_dir: options.data_dir,
        seeds,
        progress: options.progress,
        inject_panic: options.inject_panic.clone(),
    };

    let mut bundle = Bundle {
        schema_version: SchemaVersion::CURRENT,
        id: id.clone(),
        title: format!("{} on {}", plan.title, device.info().name),
        created_at,
        provenance: Provenance::Measured,
        environment,
        experiments: Vec::new(),
        status: RunStatus {
            state: RunState::Running,
            message: None,
        },
        notes: Vec::new(),
    };
    if !crate::device::reset_host_peak_rss() {
        bundle.notes.push(
            "Host peak RSS could not be reset between epochs (/proc/self/clear_refs refused): each figure is the process's peak so far.".into(),
        );
    }

    // Build every experiment first so the bundle lists them all from the start.
    let mut grids = Vec::new();
    for p in &plan.experiments {
        let grid = experiments::grid_for(p, &rc)
            .with_context(|| format!("preparing experiment {}", p.id))?;
        let skeleton = match &grid {
            Some(g) => g.skeleton(),
            None => experiments::oom_probe::skeleton(p, &rc),
        };
        if let Some(g) = &grid {
            options.progress.planned(
                g.epochs_per_unit() * skeleton.configurations.len() as u64 * u64::from(p.repeats),
            );
        }
        bundle.experiments.push(skeleton);
        grids.push(grid);
    }
    let load_at_start = envinfo::load_average();
    let mut save_error: Option<std::io::Error> = None;
    let mut save = |b: &Bundle| {
        if let Err(e) = write_atomic(&path, b) {
            save_error.get_or_insert(e);
        }
    };
    save(&bundle);

    let mut failures = 0;
    let mut interrupted = false;
    for (i, (p, grid)) in plan.experiments.iter().zip(grids.iter_mut()).enumerate() {
        let outcome = match grid {
            Some(g) => experiments::drive(&mut bundle, i, g.as_mut(), p.repeats, &rc, &mut save),
            None => experiments::oom_probe::drive(&mut bundle, i, p, &rc, &mut save),
        };
        match outcome {
            Outcome::Finished { failures: f } => failures += f,
            Outcome::Interrupted => {
                interrupted = true;
                break;
            }
        }
    }
    bundle.status = final_status(interrupted, failures);
    if let (Some(start), Some(end)) = (load_at_start, envinfo::load_average()) {
        let cores = bundle
            .environment
            .host
            .as_ref()
            .and_then(|h| h.logical_cores)
            .map_or(String::new(), |c| format!(" on {c} logical cores"));
        bundle.notes.push(format!(
            "Host load average (1 min, /proc/loadavg) {start:.2} when the run started and {end:.2} when it ended{cores}; a load above the core count means other processes competed for the CPU during the measurements."
        ));
    }
    save(&bundle);
    if let Some(e) = save_error {
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    Ok(Finished {
        bundle,
        path,
        failures,
        interrupted,
    })
}

/// The report at the end of a run, then where the bundle is: on stdout
/// after a table, on stderr after Markdown, CSV or JSON so stdout stays that.
pub(crate) fn print_report(bundle: &Bundle, path: &Path, style: report::Style) {
    print!("{}", report::render_bundle(bundle, style));
    let line = format!("bundle: {}", path.display());
    match style {
        report::Style::Compact | report::Style::Wide => println!("{line}"),
        _ => eprintln!("{line}"),
    }
}

/// The bundle's status at the end of a run.
pub(crate) fn final_status(interrupted: bool, failures: usize) -> RunStatus {
    if interrupted {
        RunStatus {
            state: RunState::Partial,
            message: Some(
                "stopped by Ctrl-C; every configuration finished before it is kept".into(),
            ),
        }
    } else {
        RunStatus {
            state: RunState::Complete,
            message: (failures > 0)
                .then(|| format!("{failures} configuration(s) failed; see their failure records")),
        }
    }
}

/// The exit code of a run: 130 after Ctrl-C, 1 when a configuration failed.
pub(crate) fn exit_code(interrupted: bool, failures: usize) -> ExitCode {
    if interrupted {
        eprintln!("interrupted: partial bundle written");
        ExitCode::from(EXIT_INTERRUPTED)
    } else if failures > 0 {
        ExitCode::from(EXIT_FAILURES)
    } else {
        ExitCode::SUCCESS
    }
}

/// First Ctrl-C: stop after the current step and write a partial bundle.
/// Second: exit at once.
pub(crate) fn install_ctrlc() -> anyhow::Result<()> {
    let result = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
        eprintln!(
            "\nCtrl-C: finishing the current step and writing a partial bundle (Ctrl-C again to quit now)"
        );
    });
    match result {
        Ok(()) | Err(ctrlc::Error::MultipleHandlers) => Ok(()),
        Err(e) => Err(e).context("installing the Ctrl-C handler"),
    }
}

/// (RFC 3339 UTC time, bundle id `YYYYMMDDTHHMMSSZ-xxxx`).
pub fn bundle_id() -> (String, String) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as i64;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    let (h, mi, se) = (s / 3600, s % 3600 / 60, s % 60);
    let state = now.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32);
    let suffix = stallscope_loader::rng::Rng::new(state).next_u64() & 0xffff;
    (
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}Z"),
        format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{se:02}Z-{suffix:04x}"),
    )
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
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

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
