//! An experiment's settings as a reader needs them beside its table: first
//! what differs between its configurations (each parameter with its values
//! in configuration order), then everything the configurations share — the
//! experiment's settings and the parameters equal in every configuration —
//! to be folded away. Values are rounded for reading (`2.19`, never
//! `2.192727592357002`).

use crate::analysis::units::show_value;
use crate::format::{Experiment, ParamValue};

/// The settings of an experiment, split for reading.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SettingsView {
    /// Parameters whose values differ between configurations: the name and
    /// its distinct values in configuration order (`—` where one lacks it).
    pub differ: Vec<(String, Vec<String>)>,
    /// The experiment's settings and the parameters every configuration
    /// has with one value, by name.
    pub shared: Vec<(String, String)>,
}

/// [`SettingsView`] of an experiment.
pub fn settings_view(e: &Experiment) -> SettingsView {
    let mut names: Vec<&String> = e
        .configurations
        .iter()
        .flat_map(|c| c.params.keys())
        .collect();
    names.sort();
    names.dedup();
    let mut view = SettingsView::default();
    for name in names {
        let values: Vec<Option<&ParamValue>> = e
            .configurations
            .iter()
            .map(|c| c.params.get(name))
            .collect();
        let mut distinct: Vec<String> = Vec::new();
        for v in &values {
            let text = v.map_or_else(|| "—".to_string(), show_value);
            if !distinct.contains(&text) {
                distinct.push(text);
            }
        }
        if distinct.len() > 1 {
            view.differ.push((name.clone(), distinct));
        } else if let Some(Some(v)) = values.first() {
            view.shared.push((name.clone(), show_value(v)));
        }
    }
    view.shared
        .extend(e.settings.iter().map(|(k, v)| (k.clone(), show_value(v))));
    view.shared.sort();
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_bundle;

    const JOB: &str = include_str!("../../../../fixtures/measured/cpu-job-tune.json");

    #[test]
    fn the_job_reads_as_what_differs_and_the_rest_rounded() {
        let b = read_bundle(JOB.as_bytes()).unwrap();
        let v = settings_view(b.experiment("job").unwrap());
        let differ: Vec<&str> = v.differ.iter().map(|(k, _)| k.as_str()).collect();
        assert!(differ.contains(&"num_workers"), "{differ:?}");
        let workers = &v.differ.iter().find(|(k, _)| k == "num_workers").unwrap().1;
        assert_eq!(workers, &["0", "1", "2"]);
        assert!(!differ.contains(&"actual_batch_size"), "{differ:?}");
        let shared: Vec<&str> = v.shared.iter().map(|(k, _)| k.as_str()).collect();
        assert!(shared.contains(&"actual_batch_size") && shared.contains(&"tune_speedup"));
        let speedup = &v
            .shared
            .iter()
            .find(|(k, _)| k == "tune_speedup")
            .unwrap()
            .1;
        assert_eq!(speedup, "2.19");
        let prefetch = &v
            .differ
            .iter()
            .find(|(k, _)| k == "actual_prefetch_factor")
            .unwrap()
            .1;
        assert_eq!(prefetch, &["—", "2"], "the script's own run has none");
    }
}
