//! A job bundle cannot contradict itself: every figure `stallscope job`
//! derives and stores in its experiments' settings is recomputed here from
//! the runs beside it, by the same functions, and a difference is a problem
//! at the setting's path.
//!
//! - `job-verify`: `ratio_median`, `ratio_min`, `ratio_max`, `pairs`,
//!   `pair_order` and `confirmed` from the pairs' ratios (`pair_ratios` of
//!   `original` and `recommended`; confirmed by `verification_confirmed`
//!   with the job's A/A floor), and the median within its own range;
//! - `job`: `tune_chosen`, `tune_fastest` and `tune_speedup` from
//!   `tune_choice`, and `tune_change` a change exactly when the choice is
//!   one and the verification (when there is one) confirmed it;
//! - every configuration: `actual_num_workers` the worker processes each
//!   window recorded;
//! - the types of the settings and of the `actual_*` parameters.
//!
//! The noise floor and the forecasts are checked for every bundle
//! ([`super::format15`]).

use super::Validator;
use super::format15::same;
use crate::analysis::{
    JOB_ID, JOB_REPLAY_ID, JOB_SCRIPT_ID, JOB_VERIFY_ID, Summary, job_noise_floor, pair_order,
    pair_ratios, tune_choice, verification_confirmed,
};
use crate::format::*;

/// What a setting or parameter must be.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Int,
    Number,
    Text,
    Bool,
}

impl Kind {
    fn admits(self, v: &ParamValue) -> bool {
        matches!(
            (self, v),
            (Kind::Int, ParamValue::Int(_))
                | (Kind::Number, ParamValue::Int(_) | ParamValue::Float(_))
                | (Kind::Text, ParamValue::Text(_))
                | (Kind::Bool, ParamValue::Bool(_))
        )
    }
    fn expected(self) -> &'static str {
        match self {
            Kind::Int => "an integer",
            Kind::Number => "a number",
            Kind::Text => "a string",
            Kind::Bool => "true or false (a JSON boolean)",
        }
    }
}

/// The settings of a job's experiments with the type each must have.
const SETTINGS: &[(&str, Kind)] = &[
    ("command", Kind::Text),
    ("steps", Kind::Int),
    ("warmup", Kind::Int),
    ("loader", Kind::Int),
    ("dataloader_class", Kind::Text),
    ("dataloader_dataset", Kind::Text),
    ("dataloader_sampler", Kind::Text),
    ("dataloader_collate_fn", Kind::Text),
    ("tune_grid", Kind::Text),
    ("tune_change", Kind::Text),
    ("tune_recommendation", Kind::Text),
    ("tune_chosen", Kind::Text),
    ("tune_fastest", Kind::Text),
    ("tune_speedup", Kind::Number),
    ("replay_max_mib", Kind::Int),
    ("ratio_median", Kind::Number),
    ("ratio_min", Kind::Number),
    ("ratio_max", Kind::Number),
    ("pairs", Kind::Int),
    ("pair_order", Kind::Text),
    ("confirmed", Kind::Bool),
];

/// The DataLoader arguments read back, with their types.
const ACTUAL: &[(&str, Kind)] = &[
    ("actual_num_workers", Kind::Int),
    ("actual_batch_size", Kind::Int),
    ("actual_prefetch_factor", Kind::Int),
    ("actual_dataset_len", Kind::Int),
    ("actual_pin_memory", Kind::Bool),
    ("actual_persistent_workers", Kind::Bool),
    ("actual_in_order", Kind::Bool),
    ("actual_start_method", Kind::Text),
];

fn number(e: &Experiment, key: &str) -> Option<f64> {
    match e.settings.get(key)? {
        ParamValue::Float(x) => Some(*x),
        ParamValue::Int(n) => Some(*n as f64),
        _ => None,
    }
}

fn text<'a>(e: &'a Experiment, key: &str) -> Option<&'a str> {
    match e.settings.get(key)? {
        ParamValue::Text(s) => Some(s),
        _ => None,
    }
}

/// A list of ratios for a message: `1.921, 2.069, 2.097`.
fn show(ratios: &[f64]) -> String {
    let v: Vec<String> = ratios.iter().map(|r| format!("{r:.4}")).collect();
    v.join(", ")
}

impl Validator {
    /// The checks of a bundle with a `job` experiment.
    pub(super) fn job(&mut self, b: &Bundle) {
        let Some(job) = b.experiment(JOB_ID) else {
            return;
        };
        for (i, e) in b.experiments.iter().enumerate() {
            let path = format!("$.experiments[{i}]");
            match e.id.as_str() {
                JOB_ID => self.tune_settings(b, e, &path),
                JOB_VERIFY_ID => self.verification(job, e, &path),
                JOB_REPLAY_ID => {}
                _ => continue,
            }
            self.setting_types(e, &path);
            for (j, c) in e.configurations.iter().enumerate() {
                self.worker_count(c, &format!("{path}.configurations[{j}]"));
            }
        }
    }

    fn setting_types(&mut self, e: &Experiment, path: &str) {
        for (key, kind) in SETTINGS {
            if let Some(v) = e.settings.get(*key)
                && !kind.admits(v)
            {
                self.push(
                    format!("{path}.settings.{key}"),
                    format!("found {}", describe(v)),
                    kind.expected(),
                );
            }
        }
    }

    /// The `actual_*` types, and `actual_num_workers` against the worker
    /// processes every window recorded.
    fn worker_count(&mut self, c: &Configuration, path: &str) {
        for (key, kind) in ACTUAL {
            if let Some(v) = c.params.get(*key)
                && !kind.admits(v)
            {
                self.push(
                    format!("{path}.params.{key}"),
                    format!("found {}", describe(v)),
                    kind.expected(),
                );
            }
        }
        let Some(ParamValue::Int(n)) = c.params.get("actual_num_workers") else {
            return;
        };
        for (k, r) in c.runs.iter().enumerate() {
            let Some(m) = r
                .memory
                .as_ref()
                .filter(|m| m.processes.iter().any(|p| p.role == "main"))
            else {
                continue;
            };
            // The workers alive at the window's end (a non-persistent
            // epoch's ended ones have no RSS there).
            let recorded = m
                .processes
                .iter()
                .filter(|p| p.role == "worker" && p.rss_bytes.is_some())
                .count();
            if recorded as i64 != *n {
                self.push(
                    format!("{path}.params.actual_num_workers"),
                    format!(
                        "{n}, but the window of runs[{k}] recorded {recorded} worker process{}",
                        if recorded == 1 { "" } else { "es" }
                    ),
                    "the number of DataLoader worker processes its windows recorded",
                );
                return;
            }
        }
    }

    /// `tune_chosen`, `tune_fastest`, `tune_speedup` and `tune_change`
    /// against `tune_choice` of the job's own runs.
    fn tune_settings(&mut self, b: &Bundle, e: &Experiment, path: &str) {
        let derived = ["tune_chosen", "tune_fastest", "tune_speedup"];
        if !derived.iter().any(|k| e.settings.contains_key(*k)) {
            return;
        }
        let Some(choice) = tune_choice(e, JOB_SCRIPT_ID, &[]) else {
            self.push(
                format!("{path}.settings.tune_chosen"),
                "a choice is stored, but the script's own settings have no whole-run figure",
                "tune_* settings only where tune_choice has a choice",
            );
            return;
        };
        for (key, want) in [
            ("tune_chosen", &choice.chosen.id),
            ("tune_fastest", &choice.fastest.id),
        ] {
            if let Some(found) = text(e, key)
                && found != want.as_str()
            {
                self.push(
                    format!("{path}.settings.{key}"),
                    format!("found {found:?}, but the runs give {want:?}"),
                    "the configuration tune_choice makes of the job's runs",
                );
            }
        }
        if let Some(x) = number(e, "tune_speedup")
            && !(x.is_finite() && x > 0.0 && same(x, choice.speedup()))
        {
            self.push(
                format!("{path}.settings.tune_speedup"),
                format!(
                    "found {x}, but the chosen's median over the script's is {} ÷ {} = {:.6}",
                    choice.chosen.rate.median,
                    choice.baseline.rate.median,
                    choice.speedup()
                ),
                "the chosen configuration's median whole-run samples/s over the script's own",
            );
        }
        // A verification that stored no verdict (stopped, failed) says
        // nothing about the change.
        let verified = b
            .experiment(JOB_VERIFY_ID)
            .filter(|v| v.settings.contains_key("confirmed"));
        let confirmed = verified.map(|v| {
            let ratios = pair_ratios(v, "original", "recommended");
            verification_confirmed(&ratios, job_noise_floor(e).as_ref())
        });
        if let Some(change) = text(e, "tune_change") {
            let keeps = change.starts_with("none");
            let should = choice.keep || confirmed == Some(false);
            if keeps != should {
                self.push(
                    format!("{path}.settings.tune_change"),
                    format!("{change:?} where the grid {} and the verification {}",
                        if choice.keep { "keeps the script's settings" } else { "picks a change" },
                        match confirmed { Some(true) => "confirms it", Some(false) => "does not confirm it", None => "did not run" }),
                    "a change exactly when the grid picks one that the verification (if any) confirms; \"none: ...\" otherwise",
                );
            }
        }
    }

    /// `job-verify`'s figures against its pairs.
    fn verification(&mut self, job: &Experiment, v: &Experiment, path: &str) {
        let keys = [
            "ratio_median",
            "ratio_min",
            "ratio_max",
            "pairs",
            "pair_order",
            "confirmed",
        ];
        if !keys.iter().any(|k| v.settings.contains_key(*k)) {
            return;
        }
        let ratios = pair_ratios(v, "original", "recommended");
        let Some(sum) = Summary::of(&ratios) else {
            self.push(
                format!("{path}.settings"),
                "verification figures, but no A/B pair in the runs",
                "figures only from pairs of `original` and `recommended` whole-run runs",
            );
            return;
        };
        let what = format!("the pairs' ratios (B ÷ A per repeat: {})", show(&ratios));
        for (key, want) in [
            ("ratio_median", sum.median),
            ("ratio_min", sum.min),
            ("ratio_max", sum.max),
        ] {
            if let Some(x) = number(v, key)
                && !same(x, want)
            {
                self.push(
                    format!("{path}.settings.{key}"),
                    format!("found {x}, but {what} give {want:.6}"),
                    format!(
                        "the {} of the pairs' ratios, recomputed from the runs",
                        &key[6..]
                    ),
                );
            }
        }
        self.ratio_in_range(v, path);
        if let Some(ParamValue::Int(n)) = v.settings.get("pairs")
            && *n != sum.n as i64
        {
            self.push(
                format!("{path}.settings.pairs"),
                format!("found {n}, but the runs hold {} pairs", sum.n),
                "the number of A/B pairs in the runs",
            );
        }
        if let Some(order) = text(v, "pair_order")
            && order != pair_order(sum.n)
        {
            self.push(
                format!("{path}.settings.pair_order"),
                format!("found {order:?}"),
                format!(
                    "{:?}, the driver's order of {} pairs",
                    pair_order(sum.n),
                    sum.n
                ),
            );
        }
        let floor = job_noise_floor(job);
        let want = verification_confirmed(&ratios, floor.as_ref());
        if let Some(ParamValue::Bool(found)) = v.settings.get("confirmed")
            && *found != want
        {
            let rule = match &floor {
                Some(f) => format!(
                    "the pairs' interval clear above the {:.1}% noise floor",
                    f.rate_floor * 100.0
                ),
                None => "every pair faster (ratio_min above 1)".to_string(),
            };
            self.push(
                format!("{path}.settings.confirmed"),
                format!(
                    "found {found}, but {what} range {:.4}–{:.4}",
                    sum.min, sum.max
                ),
                format!("{want}: confirmed exactly when {rule}"),
            );
        }
    }

    /// The stored median within the stored range.
    fn ratio_in_range(&mut self, v: &Experiment, path: &str) {
        let (Some(m), Some(lo), Some(hi)) = (
            number(v, "ratio_median"),
            number(v, "ratio_min"),
            number(v, "ratio_max"),
        ) else {
            return;
        };
        if !(lo <= m && m <= hi) {
            self.push(
                format!("{path}.settings.ratio_median"),
                format!("{m} is outside its own pairs' range {lo}–{hi}"),
                "a median between ratio_min and ratio_max",
            );
        }
    }
}

fn describe(v: &ParamValue) -> String {
    match v {
        ParamValue::Bool(b) => format!("the boolean {b}"),
        ParamValue::Int(n) => format!("the integer {n}"),
        ParamValue::Float(x) => format!("the number {x}"),
        ParamValue::Text(s) => format!("the string {s:?}"),
    }
}
