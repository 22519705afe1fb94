//! `--tune`'s grid: chosen from the job's own DataLoader settings (read back
//! by a short probe of the script's own settings) and this machine's cores.
//!
//! - `num_workers`: 0, the powers of two up to the cores, the cores, and the
//!   script's own value;
//! - `persistent_workers: true` wherever there are workers (the workers are
//!   not restarted every epoch; they hold their memory between epochs);
//! - `pin_memory: true` everywhere when the job trains on an accelerator
//!   (the copy engine reads pinned memory directly), left as the script has
//!   it on the CPU (there is no copy to speed up);
//! - `prefetch_factor`, `batch_size` and the start method stay the script's:
//!   the batch size changes the training, and the others rarely decide a
//!   stall that workers do not (`--sweep` tries them).

use serde_json::{Map, Value, json};
use stallscope_bundle::{CrashCause, Failure, TimingMode};
use stallscope_core::{UnitCtx, UnitError};

use crate::grid::{self, Point};
use crate::unit::{JobExperiment, JobPlan};

/// What the probe read back: the measured DataLoader as the script built
/// it, the accelerator it trained on, and the cores this process may use.
pub struct Probe {
    pub loader: Value,
    pub accelerator: Option<String>,
    /// The CPUs this job may use (affinity and the cgroup's quota).
    pub cores: u64,
    /// Batches of the measured loader one training step took, when the
    /// probe's records say.
    pub batches_per_step: Option<u64>,
    /// Your settings crashed in the probe, and why: the grid searches from
    /// there.
    pub crashed: Option<Failure>,
}

/// One short process of the script's own settings (no warm-up, one step,
/// whole-run): what its DataLoader uses and where it trains. Not a
/// measurement: nothing of it goes into the bundle's runs.
pub fn probe(plan: &JobPlan, cx: &UnitCtx) -> Result<Probe, String> {
    let mut plan = plan.clone();
    // A few steps: a worker short of shared memory crashes at its first
    // batches in flight, seldom the very first.
    (plan.warmup, plan.steps) = (0, 4);
    let dir = plan.work.join("probe");
    let experiment = stallscope_bundle::Experiment::new(
        "probe",
        stallscope_bundle::ExperimentKind::Loader,
        "probe",
    );
    let job = JobExperiment::new(plan, experiment, vec![json!({})]);
    let crashed = match job.one_process(0, "probe", &dir, &TimingMode::WholeRun, 0, cx) {
        Ok(_) => None,
        // A crash is where the search starts: its loader was read back.
        Err(UnitError::Recorded(f) | UnitError::Partial { failure: f, .. })
            if matches!(*f, Failure::Crashed { .. }) =>
        {
            Some(*f)
        }
        Err(UnitError::Recorded(f)) => return Err(describe(&f)),
        Err(e) => return Err(e.to_string()),
    };
    let loader = job.seen.lock().unwrap_or_else(|e| e.into_inner())[0].take();
    let accelerator = job
        .accelerator
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    let cores = stallscope_core::read_limits().usable_cpus.max(1).into();
    Ok(Probe {
        loader: loader.ok_or("the measured DataLoader's settings were not read back")?,
        accelerator,
        cores,
        batches_per_step: *job
            .batches_per_step
            .lock()
            .unwrap_or_else(|e| e.into_inner()),
        crashed,
    })
}

/// A failure's words.
pub fn describe(f: &Failure) -> String {
    match f {
        Failure::Error { message } | Failure::Crashed { message, .. } => message.clone(),
        other => format!("{other:?}"),
    }
}

/// Whether your settings crashed for want of shared memory.
fn shm_crash(p: &Probe) -> bool {
    matches!(
        &p.crashed,
        Some(Failure::Crashed {
            cause: CrashCause::SharedMemory,
            ..
        })
    )
}

/// The worker counts to try: 0, the powers of two up to `cores`, `cores`,
/// and the script's own, ascending.
pub fn worker_counts(script: u64, cores: u64) -> Vec<u64> {
    let mut v = vec![0, script, cores.max(1)];
    v.extend(std::iter::successors(Some(1u64), |w| Some(w * 2)).take_while(|w| *w <= cores));
    v.sort_unstable();
    v.dedup();
    v
}

/// Whether an epoch can end inside the measured part of a unit (warm-up
/// and window): `None` when the loader's length is unknown (an
/// IterableDataset), where persistent workers may matter.
pub fn epoch_ends_in_window(p: &Probe, warmup: u32, steps: u32) -> Option<bool> {
    let per_epoch = p.loader["batches_per_epoch"].as_u64()?;
    let per_step = p.batches_per_step.unwrap_or(1).max(1);
    Some(u64::from(warmup + steps) * per_step >= per_epoch)
}

/// `--tune`'s grid after your settings (which the caller puts first), the
/// swept keys, and why, with the knobs left out that cannot matter here.
pub fn grid(p: &Probe, warmup: u32, steps: u32) -> (Vec<Point>, Vec<String>, String) {
    let own = |k: &str| p.loader[k].clone();
    let script_workers = own("num_workers").as_u64().unwrap_or(0);
    let persistent = epoch_ends_in_window(p, warmup, steps) != Some(false);
    let mut points = Vec::new();
    for w in worker_counts(script_workers, p.cores) {
        // Your own count above the CPUs is your settings' point alone.
        if w > p.cores {
            continue;
        }
        let mut o = Map::new();
        o.insert("num_workers".into(), json!(w));
        if w > 0 && persistent {
            o.insert("persistent_workers".into(), json!(true));
        }
        if p.accelerator.is_some() {
            o.insert("pin_memory".into(), json!(true));
        }
        let same = o.iter().all(|(k, v)| own(k) == *v)
            && (w > 0 || !persistent || own("persistent_workers") != json!(true));
        if !same {
            points.push(grid::point(o.clone()));
        }
        if w > 0 && shm_crash(p) {
            o.insert("prefetch_factor".into(), json!(1));
            points.push(grid::point(o));
        }
    }
    let mut swept = vec!["num_workers".to_string()];
    let persist = if persistent {
        swept.push("persistent_workers".into());
        "persistent_workers on wherever there are workers".to_string()
    } else {
        format!(
            "persistent_workers left out: no epoch ends in the {} measured steps (an epoch is {} \
             batches), so restarting workers cannot cost anything here",
            warmup + steps,
            own("batches_per_epoch")
        )
    };
    let pin = match &p.accelerator {
        Some(a) => {
            swept.push("pin_memory".into());
            format!("pin_memory on (the job trains on {a})")
        }
        None => {
            "pin_memory left out (the job trains on the CPU: there is no copy to a device)".into()
        }
    };
    let prefetch = if shm_crash(p) {
        swept.push("prefetch_factor".into());
        "prefetch_factor 1 beside yours wherever there are workers (your settings ran out of \
         shared memory: fewer batches in flight)"
    } else {
        "prefetch_factor as yours"
    };
    let why = format!(
        "num_workers {} (0, powers of two up to this machine's {} usable CPU{}, the CPUs, \
         your own {script_workers}); {persist}; {pin}; {prefetch}; batch_size and the start \
         method as yours.",
        list(&worker_counts(script_workers, p.cores)),
        p.cores,
        if p.cores == 1 { "" } else { "s" }
    );
    (points, swept, why)
}

fn list(v: &[u64]) -> String {
    let v: Vec<String> = v.iter().map(u64::to_string).collect();
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_around_the_script_and_the_cores() {
        assert_eq!(worker_counts(0, 2), [0, 1, 2]);
        assert_eq!(worker_counts(2, 2), [0, 1, 2]);
        assert_eq!(worker_counts(3, 16), [0, 1, 2, 3, 4, 8, 16]);
        assert_eq!(worker_counts(0, 12), [0, 1, 2, 4, 8, 12]);
        assert_eq!(worker_counts(0, 1), [0, 1]);
    }

    fn probe(loader: Value, accelerator: Option<&str>) -> Probe {
        Probe {
            loader,
            accelerator: accelerator.map(String::from),
            cores: 2,
            batches_per_step: None,
            crashed: None,
        }
    }

    #[test]
    fn the_grid_leaves_out_the_script_itself() {
        let own = json!({"num_workers": 0, "persistent_workers": false, "pin_memory": false,
                         "batches_per_epoch": 100});
        let (points, swept, why) = grid(&probe(own.clone(), None), 10, 100);
        let ids: Vec<&str> = points.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "num_workers=1-persistent_workers=true",
                "num_workers=2-persistent_workers=true"
            ]
        );
        assert_eq!(swept, ["num_workers", "persistent_workers"]);
        assert!(why.contains("the job trains on the CPU"), "{why}");
        let (points, swept, _) = grid(&probe(own, Some("cuda:0 (H200)")), 10, 100);
        assert_eq!(
            points.len(),
            3,
            "workers 0 with pinning is not the script's own"
        );
        assert_eq!(swept.len(), 3);
    }

    #[test]
    fn persistent_workers_are_left_out_when_no_epoch_ends_in_the_window() {
        let own = json!({"num_workers": 0, "persistent_workers": false, "batches_per_epoch": 1875});
        let p = probe(own, None);
        assert_eq!(epoch_ends_in_window(&p, 10, 50), Some(false));
        let (points, swept, why) = grid(&p, 10, 50);
        assert!(
            points
                .iter()
                .all(|p| p.overrides.get("persistent_workers").is_none())
        );
        assert_eq!(swept, ["num_workers"]);
        assert!(
            why.contains("no epoch ends in the 60 measured steps"),
            "{why}"
        );
        let iterable = probe(json!({"num_workers": 0, "batches_per_epoch": null}), None);
        assert_eq!(
            epoch_ends_in_window(&iterable, 10, 50),
            None,
            "unknown: kept"
        );
        let accumulating = Probe {
            batches_per_step: Some(4),
            ..probe(json!({"num_workers": 0, "batches_per_epoch": 200}), None)
        };
        assert_eq!(epoch_ends_in_window(&accumulating, 10, 50), Some(true));
    }
}
