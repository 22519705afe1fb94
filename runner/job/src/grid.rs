//! `--sweep KEY=V1,V2,...` (repeatable) made into a job's configurations:
//! your settings first (the script's own, run twice as the A/A pair that
//! measures the noise), then every combination of the swept values, each a
//! set of DataLoader arguments overridden at construction; a combination
//! that is your own settings is not run a second time under another name.

use serde_json::{Map, Value, json};
use stallscope_bundle::analysis::{JOB_SCRIPT_AGAIN_ID, JOB_SCRIPT_ID};
use stallscope_bundle::{Configuration, ParamValue};

/// The DataLoader arguments a sweep may override, and the kind of value.
const KEYS: [(&str, Kind); 7] = [
    ("num_workers", Kind::Count),
    ("prefetch_factor", Kind::CountOrNone),
    ("persistent_workers", Kind::Bool),
    ("pin_memory", Kind::Bool),
    ("multiprocessing_context", Kind::StartMethod),
    ("in_order", Kind::Bool),
    // It changes the training itself: the bundle says so.
    ("batch_size", Kind::Count),
];

/// The DataLoader's arguments a job records as it really ran.
pub const RECORDED: [&str; 8] = [
    "num_workers",
    "batch_size",
    "pin_memory",
    "prefetch_factor",
    "persistent_workers",
    "in_order",
    "start_method",
    "dataset_len",
];

#[derive(Debug, Clone, Copy)]
enum Kind {
    Count,
    CountOrNone,
    Bool,
    StartMethod,
}

/// One configuration of a job.
pub struct Point {
    pub id: String,
    pub label: String,
    /// `STALLSCOPE_JOB.overrides`.
    pub overrides: Value,
}

impl Point {
    pub fn configuration(&self) -> Configuration {
        let mut c = Configuration::new(self.id.clone(), self.label.clone());
        for (k, v) in self.overrides.as_object().into_iter().flatten() {
            if let Some(p) = param(v) {
                c = c.with_param(k, p);
            }
        }
        c
    }
}

/// A JSON value as a configuration parameter (`None` for null).
pub fn param(v: &Value) -> Option<ParamValue> {
    match v {
        Value::Bool(b) => Some(ParamValue::from(*b)),
        Value::Number(n) => n
            .as_i64()
            .map(ParamValue::from)
            .or_else(|| n.as_f64().map(ParamValue::from)),
        Value::String(s) => Some(ParamValue::from(s.as_str())),
        _ => None,
    }
}

fn value(key: &str, kind: Kind, text: &str) -> Result<Value, String> {
    let t = text.trim();
    let bad = |what: &str| format!("--sweep {key}={text}: expected {what}");
    Ok(match kind {
        Kind::Count => json!(t.parse::<u64>().map_err(|_| bad("a whole number"))?),
        Kind::CountOrNone if t == "none" => Value::Null,
        Kind::CountOrNone => json!(
            t.parse::<u64>()
                .map_err(|_| bad("a whole number or none"))?
        ),
        Kind::Bool => json!(t.parse::<bool>().map_err(|_| bad("true or false"))?),
        Kind::StartMethod if matches!(t, "fork" | "spawn" | "forkserver") => json!(t),
        Kind::StartMethod => return Err(bad("fork, spawn or forkserver")),
    })
}

/// Parse one `KEY=V1,V2,...`.
fn parse(sweep: &str) -> Result<(String, Vec<Value>), String> {
    let (key, values) = sweep
        .split_once('=')
        .ok_or_else(|| format!("--sweep {sweep}: expected KEY=V1,V2,..."))?;
    let key = key.trim();
    let Some(&(_, kind)) = KEYS.iter().find(|(k, _)| *k == key) else {
        let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
        return Err(format!(
            "--sweep {sweep}: {key:?} is not one of {}",
            known.join(", ")
        ));
    };
    let values = values
        .split(',')
        .map(|v| value(key, kind, v))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((key.to_string(), values))
}

/// The keys the sweeps name, in order.
pub fn swept(sweeps: &[String]) -> Vec<String> {
    sweeps
        .iter()
        .filter_map(|s| s.split_once('=').map(|(k, _)| k.trim().to_string()))
        .collect()
}

/// Every combination of the sweeps (your settings are not among them).
pub fn points(sweeps: &[String]) -> Result<Vec<Point>, String> {
    let parsed = sweeps
        .iter()
        .map(|s| parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    if parsed.is_empty() {
        return Ok(Vec::new());
    }
    let mut combos: Vec<Map<String, Value>> = vec![Map::new()];
    for (key, values) in &parsed {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.insert(key.clone(), v.clone());
                    c
                })
            })
            .collect();
    }
    Ok(combos.into_iter().map(point).collect())
}

/// The points that differ from your settings (`own`: the `loader` record
/// of the script's DataLoader), and a note for each one that does not: it
/// is your settings, measured as such.
pub fn without_own(points: Vec<Point>, own: &Value) -> (Vec<Point>, Vec<String>) {
    let mut notes = Vec::new();
    let kept = points
        .into_iter()
        .filter(|p| {
            let same = p
                .overrides
                .as_object()
                .is_some_and(|o| o.iter().all(|(k, v)| same_setting(k, v, own)));
            if same {
                notes.push(format!(
                    "{} is what your script already uses: it is measured once, as your settings",
                    p.label
                ));
            }
            !same
        })
        .collect();
    (kept, notes)
}

/// Whether the script's DataLoader already has `key` = `v`.
fn same_setting(key: &str, v: &Value, own: &Value) -> bool {
    match key {
        "multiprocessing_context" => own["start_method"] == *v || own[key] == *v,
        _ => own[key] == *v,
    }
}

/// Your settings: nothing overridden.
pub fn script() -> Point {
    Point {
        id: JOB_SCRIPT_ID.into(),
        label: "your settings".into(),
        overrides: json!({}),
    }
}

/// Your settings again: the A/A pair whose spread is the job's noise floor.
pub fn script_again() -> Point {
    Point {
        id: JOB_SCRIPT_AGAIN_ID.into(),
        label: "your settings, again (A/A)".into(),
        overrides: json!({}),
    }
}

/// A configuration overriding `overrides`, named after them.
pub fn point(overrides: Map<String, Value>) -> Point {
    let parts: Vec<String> = overrides.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Point {
        id: parts.join("-").replace('"', ""),
        label: parts.join(", ").replace('"', ""),
        overrides: Value::Object(overrides),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_cross() {
        let p = points(&["num_workers=0,2".into(), "pin_memory=true,false".into()]).unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(
            p[0].overrides,
            json!({"num_workers": 0, "pin_memory": true})
        );
        assert_eq!(p[3].id, "num_workers=2-pin_memory=false");
        let ids: std::collections::BTreeSet<_> = p.iter().map(|x| &x.id).collect();
        assert_eq!(ids.len(), 4, "ids are unique");
        assert!(points(&[]).unwrap().is_empty());
    }

    #[test]
    fn a_point_that_is_your_settings_is_not_run_twice() {
        let p = points(&["num_workers=0,2".into()]).unwrap();
        let own = json!({"num_workers": 2, "start_method": "fork"});
        let (kept, notes) = without_own(p, &own);
        let ids: Vec<&str> = kept.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["num_workers=0"]);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with("num_workers=2 is what your script already uses"));
        let p = points(&["multiprocessing_context=fork,spawn".into()]).unwrap();
        let (kept, _) = without_own(p, &own);
        assert_eq!(kept.len(), 1, "fork is the start method the loader uses");
    }

    #[test]
    fn a_bad_sweep_is_one_message_naming_it() {
        let e = points(&["workers=2".into()]).err().unwrap();
        assert!(e.contains("\"workers\" is not one of num_workers"), "{e}");
        let e = points(&["num_workers=two".into()]).err().unwrap();
        assert_eq!(e, "--sweep num_workers=two: expected a whole number");
        let e = points(&["multiprocessing_context=thread".into()])
            .err()
            .unwrap();
        assert!(e.ends_with("expected fork, spawn or forkserver"));
        assert!(points(&["prefetch_factor=none,4".into()]).is_ok());
    }
}
