//! `--sweep KEY=V1,V2,...` (repeatable) made into a job's configurations:
//! the script's own settings first, then every combination of the swept
//! values, each a set of DataLoader arguments overridden at construction.

use serde_json::{Map, Value, json};
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

/// The script's own settings, then every combination of the sweeps.
pub fn points(sweeps: &[String]) -> Result<Vec<Point>, String> {
    let parsed = sweeps
        .iter()
        .map(|s| parse(s))
        .collect::<Result<Vec<_>, _>>()?;
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
    let mut out = vec![script()];
    if !parsed.is_empty() {
        out.extend(combos.into_iter().map(point));
    }
    Ok(out)
}

/// The script's own settings: nothing overridden.
pub fn script() -> Point {
    Point {
        id: "script".into(),
        label: "the script's own settings".into(),
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
    fn sweeps_cross_and_the_script_comes_first() {
        let p = points(&["num_workers=0,2".into(), "pin_memory=true,false".into()]).unwrap();
        assert_eq!(p.len(), 5);
        assert_eq!(p[0].id, "script");
        assert_eq!(p[0].overrides, json!({}));
        assert_eq!(
            p[1].overrides,
            json!({"num_workers": 0, "pin_memory": true})
        );
        assert_eq!(p[4].id, "num_workers=2-pin_memory=false");
        let ids: std::collections::BTreeSet<_> = p.iter().map(|x| &x.id).collect();
        assert_eq!(ids.len(), 5, "ids are unique");
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
