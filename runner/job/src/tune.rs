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
use stallscope_bundle::TimingMode;
use stallscope_core::{UnitCtx, UnitError};

use crate::grid::{self, Point};
use crate::unit::{JobExperiment, JobPlan};

/// What the probe read back: the measured DataLoader as the script built
/// it, the accelerator it trained on, and the cores this process may use.
pub struct Probe {
    pub loader: Value,
    pub accelerator: Option<String>,
    pub cores: u64,
}

/// One short process of the script's own settings (no warm-up, one step,
/// whole-run): what its DataLoader uses and where it trains. Not a
/// measurement: nothing of it goes into the bundle's runs.
pub fn probe(plan: &JobPlan, cx: &UnitCtx) -> Result<Probe, String> {
    let mut plan = plan.clone();
    (plan.warmup, plan.steps) = (0, 1);
    let dir = plan.work.join("probe");
    let experiment = stallscope_bundle::Experiment::new(
        "probe",
        stallscope_bundle::ExperimentKind::Loader,
        "probe",
    );
    let job = JobExperiment::new(plan, experiment, vec![json!({})]);
    match job.one_process(0, "probe", &dir, &TimingMode::WholeRun, 0, cx) {
        Ok(_) => {}
        Err(UnitError::Recorded(f)) => return Err(format!("{f:?}")),
        Err(e) => return Err(e.to_string()),
    }
    let loader = job.seen.lock().unwrap_or_else(|e| e.into_inner())[0].take();
    let accelerator = job
        .accelerator
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    Ok(Probe {
        loader: loader.ok_or("the measured DataLoader's settings were not read back")?,
        accelerator,
        cores,
    })
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

/// The grid (the script's own settings first), the swept keys, and why.
pub fn grid(p: &Probe) -> (Vec<Point>, Vec<String>, String) {
    let own = |k: &str| p.loader[k].clone();
    let script_workers = own("num_workers").as_u64().unwrap_or(0);
    let mut points = vec![grid::script()];
    for w in worker_counts(script_workers, p.cores) {
        let mut o = Map::new();
        o.insert("num_workers".into(), json!(w));
        if w > 0 {
            o.insert("persistent_workers".into(), json!(true));
        }
        if p.accelerator.is_some() {
            o.insert("pin_memory".into(), json!(true));
        }
        let same = o.iter().all(|(k, v)| own(k) == *v)
            && (w > 0 || own("persistent_workers") != json!(true));
        if !same {
            points.push(grid::point(o));
        }
    }
    let mut swept = vec!["num_workers".to_string(), "persistent_workers".to_string()];
    let pin = match &p.accelerator {
        Some(a) => {
            swept.push("pin_memory".into());
            format!("pin_memory on (the job trains on {a})")
        }
        None => "pin_memory as the script has it (the job trains on the CPU: no copy)".into(),
    };
    let why = format!(
        "num_workers {} (0, powers of two up to this machine's {} cores, the cores, the script's \
         own {script_workers}); persistent_workers on wherever there are workers; {pin}; \
         prefetch_factor, batch_size and the start method the script's own.",
        list(&worker_counts(script_workers, p.cores)),
        p.cores
    );
    (points, swept, why)
}

fn list(v: &[u64]) -> String {
    let v: Vec<String> = v.iter().map(u64::to_string).collect();
    v.join(", ")
}

/// The change to make to the script's DataLoader call: the overrides whose
/// value differs from what the script's own DataLoader used, in Python.
pub fn change(overrides: &Value, script: &Value) -> String {
    let args: Vec<String> = overrides
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| script[k.as_str()] != **v)
        .map(|(k, v)| format!("{k}={}", python(v)))
        .collect();
    format!("DataLoader(..., {})", args.join(", "))
}

fn python(v: &Value) -> String {
    match v {
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
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

    #[test]
    fn the_grid_leaves_out_the_script_itself() {
        let p = Probe {
            loader: json!({"num_workers": 0, "persistent_workers": false, "pin_memory": false}),
            accelerator: None,
            cores: 2,
        };
        let (points, swept, why) = grid(&p);
        let ids: Vec<&str> = points.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "script",
                "num_workers=1-persistent_workers=true",
                "num_workers=2-persistent_workers=true"
            ]
        );
        assert_eq!(swept, ["num_workers", "persistent_workers"]);
        assert!(why.contains("the job trains on the CPU"), "{why}");
        let gpu = Probe {
            accelerator: Some("cuda:0 (H200)".into()),
            ..p
        };
        let (points, swept, _) = grid(&gpu);
        assert_eq!(
            points.len(),
            4,
            "workers 0 with pinning is not the script's own"
        );
        assert_eq!(swept.len(), 3);
    }

    #[test]
    fn the_change_names_only_what_differs() {
        let script = json!({"num_workers": 0, "persistent_workers": false, "pin_memory": true});
        let o = json!({"num_workers": 2, "persistent_workers": true, "pin_memory": true});
        assert_eq!(
            change(&o, &script),
            "DataLoader(..., num_workers=2, persistent_workers=True)"
        );
    }
}
