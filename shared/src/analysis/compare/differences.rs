//! What differs between two bundles besides their figures: the settings of
//! an experiment and the machine and software. Each field is stated by both
//! sides, or by one only (a published table names no CPU; a suite states
//! settings another does not). For reading, [`DifferenceGroups`] lists the
//! fields both sides state with different values one by one and folds the
//! fields only one side states into one line per side, by name.

use std::collections::BTreeMap;

use crate::format::{Bundle, ParamValue, Provenance};

/// A field that differs between two bundles; `None` where a side does not
/// state it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub field: String,
    pub base: Option<String>,
    pub new: Option<String>,
}

/// A side's value of a field, `—` where it states none.
pub fn stated_or_dash(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "—".into())
}

/// A field both sides state, with their two values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueChange {
    pub field: String,
    pub base: String,
    pub new: String,
}

/// Differences as read in a meeting: those both sides state, one line each;
/// the fields only one side states, by name, one line per side.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DifferenceGroups {
    /// Stated by both sides, with different values, in field order.
    pub both: Vec<ValueChange>,
    /// Fields only BASE states.
    pub only_base: Vec<String>,
    /// Fields only NEW states.
    pub only_new: Vec<String>,
}

impl DifferenceGroups {
    /// Group differences: every field lands in exactly one group.
    pub fn of(differences: &[Difference]) -> DifferenceGroups {
        let mut g = DifferenceGroups::default();
        for d in differences {
            match (&d.base, &d.new) {
                (Some(b), Some(n)) => g.both.push(ValueChange {
                    field: d.field.clone(),
                    base: b.clone(),
                    new: n.clone(),
                }),
                (Some(_), None) => g.only_base.push(d.field.clone()),
                (None, Some(_)) => g.only_new.push(d.field.clone()),
                (None, None) => {}
            }
        }
        g
    }

    pub fn is_empty(&self) -> bool {
        self.both.is_empty() && self.only_base.is_empty() && self.only_new.is_empty()
    }

    /// One change as a line: `samples: BASE 512 vs NEW 128`.
    pub fn change_line(c: &ValueChange, base: &str, new: &str) -> String {
        format!("{}: {base} {} vs {new} {}", c.field, c.base, c.new)
    }

    /// The fields only one side states, folded into one line: `only NEW
    /// states 3 settings: data, drop_last, lr` (`noun` plural: "settings").
    pub fn only_line(side: &str, names: &[String], noun: &str) -> Option<String> {
        match names.len() {
            0 => None,
            1 => Some(format!("only {side} states {}", names[0])),
            n => Some(format!(
                "only {side} states {n} {noun}: {}",
                names.join(", ")
            )),
        }
    }

    /// Every line in order: the changes, then BASE's and NEW's folds.
    pub fn lines(&self, base: &str, new: &str, noun: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .both
            .iter()
            .map(|c| Self::change_line(c, base, new))
            .collect();
        out.extend(Self::only_line(base, &self.only_base, noun));
        out.extend(Self::only_line(new, &self.only_new, noun));
        out
    }
}

/// Settings (or parameters) that differ between two maps, in key order.
pub(super) fn map_differences(
    a: &BTreeMap<String, ParamValue>,
    b: &BTreeMap<String, ParamValue>,
) -> Vec<Difference> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let x = a.get(k).map(|v| v.to_string());
            let y = b.get(k).map(|v| v.to_string());
            (x != y).then(|| Difference {
                field: k.clone(),
                base: x,
                new: y,
            })
        })
        .collect()
}

fn provenance_text(b: &Bundle) -> String {
    match &b.provenance {
        Provenance::Measured => "measured".into(),
        Provenance::Published { citation, .. } => format!("published: {}", citation.title),
    }
}

/// The machine and software fields of a bundle, `None` where it states none.
fn machine_fields(b: &Bundle) -> Vec<(&'static str, Option<String>)> {
    let e = &b.environment;
    let device = e.device.as_ref();
    let host = e.host.as_ref();
    vec![
        ("provenance", Some(provenance_text(b))),
        (
            "device",
            device.map(|d| format!("{} ({})", d.name, d.kind.as_str())),
        ),
        (
            "device memory",
            device
                .and_then(|d| d.memory_total_bytes)
                .map(|m| crate::analysis::units::show_bytes(m as f64)),
        ),
        ("driver", device.and_then(|d| d.driver.clone())),
        ("CUDA runtime", device.and_then(|d| d.cuda_runtime.clone())),
        ("CPU", host.and_then(|h| h.cpu_model.clone())),
        (
            "logical cores",
            host.and_then(|h| h.logical_cores).map(|c| c.to_string()),
        ),
        ("OS", host.and_then(|h| h.os.clone())),
        ("libtorch", e.libtorch.as_ref().map(|l| l.version.clone())),
        (
            "precision",
            e.precision.as_ref().map(|p| {
                format!(
                    "{} (TF32 matmul {}, cuDNN {})",
                    p.dtype, p.tf32_matmul, p.tf32_cudnn
                )
            }),
        ),
        (
            "torch threads",
            e.threads
                .as_ref()
                .and_then(|t| t.torch_intra_op)
                .map(|t| t.to_string()),
        ),
        (
            "runner",
            e.runner
                .as_ref()
                .map(|r| format!("{} {}", r.name, r.version)),
        ),
    ]
}

/// The job's own fields: its world size (ranks are the job's choice, not
/// the machine's). A job's command is its experiment's setting, compared
/// with the other settings.
fn job_fields(b: &Bundle) -> Vec<(&'static str, Option<String>)> {
    vec![("world size (ranks)", Some(b.ranks.len().max(1).to_string()))]
}

/// Job fields that differ between two bundles: a different world size is a
/// different job, whatever the machines.
pub fn job_differences(base: &Bundle, new: &Bundle) -> Vec<Difference> {
    job_fields(base)
        .into_iter()
        .zip(job_fields(new))
        .filter(|(x, y)| x.1 != y.1)
        .map(|(x, y)| Difference {
            field: x.0.to_string(),
            base: x.1,
            new: y.1,
        })
        .collect()
}

/// Settings that record what a job concluded rather than how it ran (its
/// recommendation, the A/B pairs' figures): compared as results, not listed
/// as settings that differ.
pub fn is_result_setting(key: &str) -> bool {
    key.starts_with("tune_")
        || matches!(
            key,
            "ratio_median" | "ratio_min" | "ratio_max" | "pairs" | "pair_order" | "confirmed"
        )
}

/// Machine and software fields that differ between two bundles.
pub fn environment_differences(base: &Bundle, new: &Bundle) -> Vec<Difference> {
    machine_fields(base)
        .into_iter()
        .zip(machine_fields(new))
        .filter(|(x, y)| x.1 != y.1)
        .map(|(x, y)| Difference {
            field: x.0.to_string(),
            base: x.1,
            new: y.1,
        })
        .collect()
}
