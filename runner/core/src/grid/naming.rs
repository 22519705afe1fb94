//! A point's configuration id (stable: native ids are those of format 1.0,
//! and a knob at its plain value adds nothing) and its label, which names
//! what differs between the configurations of one sweep.

use stallscope_loader::WorkerKind;

use super::{Point, engine_swept};
use crate::suite::{DaliDevice, EngineName, LoaderPlan};

/// The configuration id of a point.
pub fn point_id(p: Point) -> String {
    let ptd = if p.to_device { "-ptd1" } else { "" };
    let pin = p.pinned as u8;
    let bf = if p.batched { "-bf1" } else { "" };
    match (p.engine, p.workers) {
        (EngineName::Native, 0) => format!("w0-pin{pin}{ptd}"),
        (EngineName::Native, w) => format!(
            "w{w}-{}-pf{}-pers{}-pin{pin}{ptd}",
            p.kind.as_str(),
            p.prefetch,
            p.persistent as u8,
        ),
        (EngineName::Pytorch, 0) => format!("pytorch-w0-pin{pin}{ptd}{bf}"),
        (EngineName::Pytorch, w) => format!(
            "pytorch-w{w}-{}-pf{}-pers{}-pin{pin}{ptd}{bf}",
            p.context.as_str(),
            p.prefetch,
            p.persistent as u8,
        ),
        (EngineName::Spdl, c) => match p.kind {
            WorkerKind::Threads => format!("spdl-c{c}-pf{}{ptd}", p.prefetch),
            WorkerKind::Processes => format!("spdl-c{c}-processes-pf{}{ptd}", p.prefetch),
        },
        (EngineName::Dali, t) => {
            let mixed = match p.dali_device {
                DaliDevice::Cpu => "",
                DaliDevice::Mixed => "-mixed",
            };
            format!("dali-t{t}-pf{}-pin{pin}{mixed}{ptd}", p.prefetch)
        }
        (EngineName::Nodes, 0) => format!("nodes-w0-pin{pin}{ptd}"),
        (EngineName::Nodes, w) => format!(
            "nodes-w{w}-{}-pf{}-pin{pin}{ptd}",
            p.kind.as_str(),
            p.prefetch
        ),
    }
}

/// How a point's loader works, in a few words.
fn workers_label(p: Point, lp: &LoaderPlan) -> String {
    match (p.engine, p.workers) {
        (_, 0) => "in loop (0 workers)".to_string(),
        (EngineName::Spdl, c) if lp.kinds.len() > 1 => {
            format!("concurrency {c} ({})", p.kind.as_str())
        }
        (EngineName::Spdl, c) => format!("concurrency {c}"),
        (EngineName::Pytorch, w) if lp.contexts.len() > 1 => {
            format!("{w} worker{} ({})", plural(w), p.context.as_str())
        }
        (EngineName::Pytorch, w) => format!("{w} worker{}", plural(w)),
        (EngineName::Dali, t) => format!("{t} thread{}", plural(t)),
        (EngineName::Native | EngineName::Nodes, 1) => {
            let one = match p.kind.as_str() {
                "processes" => "process",
                other => other.trim_end_matches('s'),
            };
            format!("1 {one}")
        }
        (EngineName::Native | EngineName::Nodes, w) => format!("{w} {}", p.kind.as_str()),
    }
}

/// `s` unless one.
fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A label that names what differs between the configurations.
pub fn label(p: Point, lp: &LoaderPlan, pin_note: Option<&str>) -> String {
    let mut parts = Vec::new();
    if engine_swept(lp) {
        parts.push(p.engine.as_str().to_string());
    }
    parts.push(workers_label(p, lp));
    if p.workers > 0 && lp.prefetch.len() > 1 {
        parts.push(format!("prefetch {}", p.prefetch));
    }
    let restartable = matches!(p.engine, EngineName::Native | EngineName::Pytorch);
    if p.workers > 0 && restartable && lp.persistent.len() > 1 {
        parts.push(
            if p.persistent {
                "persistent"
            } else {
                "restarted"
            }
            .into(),
        );
    }
    if lp.pinned.len() > 1 && p.engine != EngineName::Spdl {
        parts.push(match (p.pinned, pin_note) {
            (true, Some(_)) => "pin skipped".into(),
            (true, None) => "pinned".into(),
            (false, _) => "pageable".into(),
        });
    }
    if lp.prefetch_to_device.len() > 1 && p.to_device {
        parts.push("device prefetch".into());
    }
    if lp.batched_fetch.len() > 1 && p.engine == EngineName::Pytorch {
        parts.push(
            if p.batched {
                "batched fetch"
            } else {
                "per-sample fetch"
            }
            .into(),
        );
    }
    if lp.dali_devices.len() > 1 && p.engine == EngineName::Dali {
        parts.push(format!("{} decode", p.dali_device.as_str()));
    }
    parts.join(", ")
}
