//! The change to make to the script's DataLoader call, in Python: the
//! chosen configuration's swept values that differ from yours.

use crate::analysis::your_job::JOB_SCRIPT_ID;
use crate::format::{Experiment, ParamValue};

/// The change to make to the script's DataLoader call: the chosen
/// configuration's swept values that differ from yours, in Python.
pub fn change_of(e: &Experiment, chosen: &str) -> Option<String> {
    let c = e.configuration(chosen)?;
    let own = e.configuration(JOB_SCRIPT_ID)?;
    let args: Vec<String> = e
        .swept
        .iter()
        .filter_map(|k| Some((k, c.params.get(k)?)))
        .filter(|(k, v)| own.params.get(k.as_str()) != Some(*v))
        .map(|(k, v)| format!("{k}={}", python(v)))
        .collect();
    (!args.is_empty()).then(|| format!("DataLoader(..., {})", args.join(", ")))
}

fn python(v: &ParamValue) -> String {
    match v {
        ParamValue::Bool(true) => "True".into(),
        ParamValue::Bool(false) => "False".into(),
        ParamValue::Text(s) => format!("{s:?}"),
        ParamValue::Int(n) => n.to_string(),
        ParamValue::Float(x) => x.to_string(),
    }
}
