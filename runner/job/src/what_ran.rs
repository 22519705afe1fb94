//! What a job's DataLoader really used, recorded per configuration as the
//! units read it back (`actual_*` parameters, the script's own values of
//! the swept keys, the loader's notes), and the device it trained on.

use serde_json::Value;
use stallscope_bundle::{Experiment, ParamValue};

use crate::grid;

/// The device the job trained on, as its processes said (`done`'s
/// `accelerator`), else the CPU.
pub(crate) fn device(accelerator: Option<&str>) -> stallscope_bundle::DeviceInfo {
    use stallscope_bundle::{DeviceInfo, DeviceKind};
    match accelerator {
        Some(name) => DeviceInfo::new(DeviceKind::Cuda, name),
        None => DeviceInfo::new(
            DeviceKind::Cpu,
            stallscope_core::cpu_model().unwrap_or_else(|| "CPU".into()),
        ),
    }
}

/// What the job's DataLoader really used, per configuration: its settings
/// as parameters (`actual_*`, and `actual_iterable_dataset` for an
/// IterableDataset), read back after construction; the script's own
/// configuration gets its values of the swept keys too. Returns the
/// loader's notes (an IterableDataset duplicated across workers), each
/// prefixed with its configuration, for the bundle's notes. `seen` holds
/// each configuration's `loader` record, as far as the units read it.
pub(crate) fn record_what_ran(e: &mut Experiment, seen: &[Option<Value>]) -> Vec<String> {
    let mut notes = Vec::new();
    let swept = e.swept.clone();
    for (c, loader) in e.configurations.iter_mut().zip(seen.iter()) {
        if c.batch_bytes.is_none() {
            c.batch_bytes = batch_bytes(c);
        }
        for key in &swept {
            if c.params.contains_key(key) {
                continue;
            }
            if let Some(v) = loader.as_ref().and_then(|l| grid::param(&l[key.as_str()])) {
                // Read back by a later unit than the last save's.
                c.not_applicable.remove(key);
                c.params.insert(key.clone(), v);
            } else {
                c.not_applicable.insert(
                    key.clone(),
                    "the script's own setting, which was not read back (no unit completed, or \
                     the DataLoader reports none)"
                        .into(),
                );
            }
        }
        let Some(l) = loader else { continue };
        // "actual" is what PyTorch runs the loader with (protocol 2's
        // `in_effect`: no pinning without an accelerator), else as read back.
        for key in grid::RECORDED {
            let v = l["in_effect"]
                .get(key)
                .filter(|_| l["in_effect"].is_object())
                .unwrap_or(&l[key]);
            if let Some(v) = grid::param(v) {
                c.params.insert(format!("actual_{key}"), v);
            }
        }
        for a in l["adjustments"].as_array().into_iter().flatten() {
            notes.push(format!("{} ({}): {}", e.id, c.id, adjustment(a)));
        }
        if l["iterable_dataset"] == true {
            c.params
                .insert("actual_iterable_dataset".into(), ParamValue::from(true));
        }
        for n in l["notes"].as_array().into_iter().flatten() {
            if let Some(n) = n.as_str() {
                notes.push(format!("{} ({}): {n}", e.id, c.id));
            }
        }
    }
    if let Some(l) = seen.iter().flatten().next() {
        for key in ["class", "dataset", "sampler", "collate_fn"] {
            if let Some(v) = grid::param(&l[key]) {
                e.settings.insert(format!("dataloader_{key}"), v);
            }
        }
    }
    notes
}

/// Bytes of one batch, from a whole-run window's bytes over its steps.
fn batch_bytes(c: &stallscope_bundle::Configuration) -> Option<u64> {
    c.runs.iter().find_map(|r| {
        let w = r.whole_run.as_ref()?;
        let (bytes, steps) = (w.bytes?, w.steps?);
        (steps > 0 && bytes > 0).then(|| bytes / steps)
    })
}

/// One change to what the script asked, in words: `pin_memory: asked True,
/// in effect False (PyTorch: no accelerator)`.
fn adjustment(a: &Value) -> String {
    let show = |v: &Value| match v {
        Value::Bool(true) => "True".to_string(),
        Value::Bool(false) => "False".to_string(),
        Value::Null => "None".to_string(),
        other => other.to_string(),
    };
    let by = match a["by"].as_str() {
        Some("pytorch") => "PyTorch",
        Some("stallscope") => "stallscope",
        _ => "?",
    };
    format!(
        "{}: asked {}, in effect {} ({by}: {})",
        a["key"].as_str().unwrap_or("?"),
        show(&a["asked"]),
        show(&a["in_effect"]),
        a["why"].as_str().unwrap_or("")
    )
}

/// Each configuration's forecast (`shared`'s `forecast`) from its last
/// whole-run window, against the machine's limits: shared memory in flight,
/// the workers' private memory at the epoch's end and across epochs.
pub(crate) fn forecast_all(e: &mut Experiment, limits: Option<&stallscope_bundle::HostLimits>) {
    use stallscope_bundle::analysis::{forecast, forecast_inputs};
    let forecasts: Vec<_> = e
        .configurations
        .iter()
        .map(|c| forecast_inputs(e, c).map(|i| forecast(&i, limits)))
        .collect();
    for (c, f) in e.configurations.iter_mut().zip(forecasts) {
        if f.is_some() {
            c.forecast = f;
        }
    }
}
