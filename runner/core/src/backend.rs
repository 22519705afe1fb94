//! Back ends and the run of a whole suite. A [`Backend`] (libtorch, wgpu:
//! the device a suite runs on; the Python-hosted loader engines run under
//! the libtorch one) turns each plan entry into a [`Driven`] experiment — or
//! a skeleton that says why it is not applicable — and says what the bundle
//! records about its device; [`run_plan`] puts them in one bundle and runs
//! each through the one driver. Nothing here knows a device.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use stallscope_bundle::{
    Bundle, Environment, Provenance, RunState, RunStatus, SchemaVersion, Seeds, SuiteRecord,
};

use crate::bundle_file::write_atomic;
use crate::driver::{self, Driven, Outcome, Progress, UnitCtx, UnitError};
use crate::envinfo;
use crate::suite::{ExperimentPlan, Plan};

/// A device back end (libtorch, wgpu) that runs experiments.
pub trait Backend {
    /// What the bundle records about the machine, the device and libraries
    /// (`run_plan` adds the suite and the seeds).
    fn environment(&self) -> Environment;
    /// The device's name, for the bundle's title.
    fn device_name(&self) -> String;
    /// Added to the title after the device (e.g. " (wgpu)").
    fn title_suffix(&self) -> &str {
        ""
    }
    /// Notes for the bundle about how this back end measured (by default
    /// the one loop's: whether each epoch's host peak is its own).
    fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = crate::host::peak_rss_note().into_iter().collect();
        if crate::ranks::barrier_active() {
            notes.push(crate::ranks::SYNCED_BARRIER_NOTE.into());
        }
        notes
    }
    /// The experiment of a plan entry as this back end runs it; its skeleton
    /// carries `not_applicable` (with the reason) when it cannot.
    fn experiment<'a>(
        &'a self,
        plan: &'a ExperimentPlan,
        suite: &'a Plan,
    ) -> Result<Box<dyn Driven + 'a>, UnitError>;
}

/// The seeds of a plan: weights and shuffle from `seed`, data from `data_seed`.
pub fn seeds(plan: &Plan) -> Seeds {
    Seeds {
        weights: plan.seed,
        shuffle: plan.seed,
        data: plan.data_seed,
    }
}

/// Where and how [`run_plan`] runs.
pub struct RunOptions<'a> {
    /// The bundle goes to `out_dir/bundle.json` (default `out/<bundle id>`),
    /// rewritten atomically after every unit.
    pub out_dir: Option<&'a Path>,
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

/// Run a validated plan on a back end: every experiment through the driver,
/// the bundle saved after every unit and at the end. Printing is the
/// caller's.
pub fn run_plan(
    plan: &Plan,
    backend: &dyn Backend,
    options: &RunOptions,
) -> anyhow::Result<Finished> {
    let (mut bundle, path) = started_bundle(plan, backend, options.out_dir);

    // Build every experiment first so the bundle lists them all from the start.
    let mut driven: Vec<Box<dyn Driven + '_>> = Vec::new();
    for p in &plan.experiments {
        let d = backend
            .experiment(p, plan)
            .with_context(|| format!("preparing experiment {}", p.id))?;
        let skeleton = d.skeleton();
        options.progress.planned(
            d.epochs_per_unit() * skeleton.configurations.len() as u64 * u64::from(p.repeats),
        );
        bundle.experiments.push(skeleton);
        driven.push(d);
    }
    let load_at_start = envinfo::load_average();
    let mut save_error: Option<std::io::Error> = None;
    let mut save = |b: &Bundle| {
        if let Err(e) = write_atomic(&path, b) {
            save_error.get_or_insert(e);
        }
    };
    save(&bundle);

    let cx = UnitCtx {
        stop: options.stop,
        progress: options.progress,
        inject_panic: options.inject_panic.clone(),
    };
    let mut failures = 0;
    let mut interrupted = false;
    for (i, (p, d)) in plan.experiments.iter().zip(driven.iter_mut()).enumerate() {
        match driver::drive(&mut bundle, i, d.as_mut(), p.repeats, &cx, &mut save) {
            Outcome::Finished { failures: f } => failures += f,
            Outcome::Interrupted => {
                interrupted = true;
                break;
            }
        }
    }
    bundle.status = final_status(interrupted, failures);
    bundle
        .notes
        .extend(load_note(&bundle, load_at_start, envinfo::load_average()));
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

/// The bundle a run starts with (its environment, id and title, no
/// experiments yet) and the file it is saved to.
fn started_bundle(plan: &Plan, backend: &dyn Backend, out_dir: Option<&Path>) -> (Bundle, PathBuf) {
    let mut environment = backend.environment();
    environment.command_line = std::env::args().collect();
    environment.suite = Some(SuiteRecord {
        name: plan.name.clone(),
        path: plan.path.as_ref().map(|p| p.display().to_string()),
        toml: plan.toml.clone(),
    });
    environment.seeds = Some(seeds(plan));
    environment.rank = crate::ranks::current().map(|r| r.layout.clone());

    let (created_at, id) = bundle_id();
    let out_dir = out_dir.map_or_else(|| crate::ranks::default_out_dir(&id), Path::to_path_buf);
    // Rank R of a ranked run writes bundle.rank-R.json.
    let path = crate::ranks::per_rank(&out_dir.join("bundle.json"));
    let bundle = Bundle {
        schema_version: SchemaVersion::CURRENT,
        id: id.clone(),
        title: format!(
            "{} on {}{}",
            plan.title,
            backend.device_name(),
            backend.title_suffix()
        ),
        created_at,
        provenance: Provenance::Measured,
        environment,
        experiments: Vec::new(),
        status: RunStatus {
            state: RunState::Running,
            message: None,
        },
        ranks: Vec::new(),
        notes: backend.notes(),
    };
    (bundle, path)
}

/// How loaded the host was over the run, when both readings exist.
fn load_note(bundle: &Bundle, start: Option<f64>, end: Option<f64>) -> Option<String> {
    let (start, end) = (start?, end?);
    let cores = bundle
        .environment
        .host
        .as_ref()
        .and_then(|h| h.logical_cores)
        .map_or(String::new(), |c| format!(" on {c} logical cores"));
    Some(format!(
        "Host load average (1 min, /proc/loadavg) {start:.2} when the run started and {end:.2} when it ended{cores}; a load above the core count means other processes competed for the CPU during the measurements."
    ))
}

/// The bundle's status at the end of a run.
pub fn final_status(interrupted: bool, failures: usize) -> RunStatus {
    if interrupted {
        RunStatus {
            state: RunState::Partial,
            message: Some(
                "stopped (Ctrl-C or SIGTERM); every configuration finished before it is kept"
                    .into(),
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
    let suffix = stallscope_loader::Rng::new(state).next_u64() & 0xffff;
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
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
