//! The job from its options to its bundle: the grid (the script's own
//! settings and `--sweep`'s points, or `--tune`'s grid from a probe), the
//! replay, the recommendation and its verification, each an experiment of
//! one bundle run by the one driver; then the final status, the save and
//! the ranks' bundles.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use stallscope_bundle::{
    Bundle, Experiment, ExperimentKind, ParamValue, Provenance, RunState, RunStatus, SchemaVersion,
};
use stallscope_core::{Progress, UnitCtx, bundle_id, final_status};

use crate::options::{JobError, JobEvents, JobOptions, JobOutcome};
use crate::session::Session;
use crate::unit::{JobExperiment, JobPlan};
use crate::{grid, replay, tune, verify, what_ran};

/// Run the job: every experiment it asks for, the bundle saved after each
/// unit; a stop ends it early with what was measured kept.
pub fn run(
    args: &JobOptions,
    stop: &AtomicBool,
    progress: &dyn Progress,
    events: &dyn JobEvents,
) -> Result<JobOutcome, JobError> {
    let sweep = grid::points(&args.sweep).map_err(JobError::Sweep)?;
    let (created_at, id) = bundle_id();
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out").join(&id));
    let plan = plan(args, &out_dir)?;
    let cx = UnitCtx {
        stop,
        progress,
        inject_panic: None,
    };
    let bundle = new_bundle(args, id, created_at);
    let mut s = Session::new(bundle, out_dir.join("bundle.json"), &cx);
    let (points, swept, why) = if args.tune {
        tuned_grid(&plan, &cx, events)
    } else {
        (sweep, grid::swept(&args.sweep), None)
    };
    let overrides = points.iter().map(|p| p.overrides.clone()).collect();
    let mut job = JobExperiment::new(plan.clone(), skeleton(args, &points, swept, why), overrides);
    let index = s.drive(&mut job, args.repeats);
    let mut closing = Vec::new();
    if args.replay || args.tune {
        let mut r = replay::job(&plan, args.replay_mib);
        if let Some(ri) = s.drive(&mut r, args.repeats) {
            let held = r.replayed.lock().unwrap_or_else(|e| e.into_inner()).clone();
            replay::record(&mut s.bundle.experiments[ri], held.as_ref());
        }
    }
    match index {
        Some(i) if args.tune && !s.interrupted => {
            closing = verify::recommend(&mut s, &plan, args.verify_pairs, i, &job);
        }
        Some(_) if args.replay => closing.extend(replay::sentence(&s.bundle)),
        _ => {}
    }
    Ok(finish(s, closing, &plan))
}

fn plan(args: &JobOptions, out_dir: &Path) -> Result<JobPlan, JobError> {
    let work = out_dir.join("units");
    std::fs::create_dir_all(&work).map_err(|source| JobError::Folder {
        path: work.clone(),
        source,
    })?;
    Ok(JobPlan {
        command: args.command.clone(),
        warmup: args.warmup,
        steps: args.steps,
        loader: args.loader,
        timeout: Duration::from_secs_f64(args.timeout),
        work,
        python_dir: stallscope_python::packages_dir().map_err(JobError::Packages)?,
        ranks: Default::default(),
    })
}

/// `--tune`'s grid from a probe of the script's own settings; the script's
/// settings alone when the probe fails (their failure is then recorded).
fn tuned_grid(
    plan: &JobPlan,
    cx: &UnitCtx,
    events: &dyn JobEvents,
) -> (Vec<grid::Point>, Vec<String>, Option<String>) {
    match tune::probe(plan, cx) {
        Ok(p) => {
            let (points, swept, why) = tune::grid(&p);
            events.note(&format!("stallscope job --tune: {why}"));
            (points, swept, Some(why))
        }
        Err(e) => {
            events.note(&format!(
                "stallscope job --tune: the script's own settings failed in the probe: {e}"
            ));
            let why = format!("none: the probe of the script's own settings failed ({e})");
            (vec![grid::script()], Vec::new(), Some(why))
        }
    }
}

/// The final status and save, and the ranks' bundles when the command
/// launched ranks.
fn finish(mut s: Session, closing: Vec<String>, plan: &JobPlan) -> JobOutcome {
    s.bundle.environment.device = Some(what_ran::device(s.accelerator.as_deref()));
    s.bundle.status = final_status(s.interrupted, s.failures);
    s.save();
    let dir = s.path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let ranks = plan.ranks.write(&s.bundle, &dir).unwrap_or_else(|e| {
        s.failures += 1;
        Some(format!("ranks: {e}"))
    });
    JobOutcome {
        bundle: s.bundle,
        path: s.path,
        closing,
        ranks,
        failures: s.failures,
        interrupted: s.interrupted,
    }
}

/// The experiment: one configuration per point, the script's own first.
fn skeleton(
    args: &JobOptions,
    points: &[grid::Point],
    swept: Vec<String>,
    grid_why: Option<String>,
) -> Experiment {
    let mut e = Experiment::new("job", ExperimentKind::Loader, "Your training job");
    e.description = Some(format!(
        "The command's own training loop, unmodified: its DataLoader (iteration index {}) \
         measured over {} steps after {} warm-up steps, in a fresh process per timing mode and \
         repeat. Whole-run: no synchronisation inside the window; diagnostic: the device \
         synchronised around next() and around the batch's host-to-device copies.",
        args.loader, args.steps, args.warmup
    ));
    e.swept = swept;
    e.baseline = points.first().map(|p| p.id.clone());
    e.configurations = points.iter().map(grid::Point::configuration).collect();
    let command = if args.redact_args {
        args.command.first().cloned().unwrap_or_default() + " (arguments left out)"
    } else {
        args.command.join(" ")
    };
    for (k, v) in [
        ("command", ParamValue::from(command)),
        ("steps", ParamValue::from(args.steps)),
        ("warmup", ParamValue::from(args.warmup)),
        ("loader", ParamValue::from(args.loader)),
    ] {
        e.settings.insert(k.into(), v);
    }
    if let Some(why) = grid_why {
        e.settings.insert("tune_grid".into(), ParamValue::from(why));
    }
    e
}

fn new_bundle(args: &JobOptions, id: String, created_at: String) -> Bundle {
    let mut environment = stallscope_bundle::Environment {
        runner: Some(stallscope_core::runner_info()),
        host: Some(stallscope_core::host_info()),
        limits: Some(stallscope_core::read_limits()),
        ..Default::default()
    };
    environment.command_line = if args.redact_args {
        vec!["stallscope job (arguments left out with --redact-args)".into()]
    } else {
        args.command_line.clone()
    };
    Bundle {
        schema_version: SchemaVersion::CURRENT,
        id,
        title: format!("Job: {}", args.command.first().map_or("", String::as_str)),
        created_at,
        provenance: Provenance::Measured,
        environment,
        experiments: Vec::new(),
        status: RunStatus {
            state: RunState::Running,
            message: None,
        },
        ranks: Vec::new(),
        notes: Vec::new(),
    }
}
