//! `stallscope trace`: the per-step timeline of one diagnostic run as Chrome
//! trace-event JSON (`ph: "X"` events per stage, µs), to open in Perfetto or
//! chrome://tracing.

use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};
use stallscope_bundle::{Bundle, StepSeries};

use crate::cli::TraceArgs;
use stallscope_core::bundle_file;

/// Stage names in step order, with their thread id in the trace.
const STAGES: [&str; 3] = ["next_wait", "transfer", "compute"];

pub fn run(args: &TraceArgs) -> anyhow::Result<ExitCode> {
    let bundle =
        bundle_file::read(&args.bundle).map_err(|e| anyhow::anyhow!(e.paragraphs().join("\n")))?;
    let trace = build_trace(&bundle, &args.run)?;
    let text = serde_json::to_string(&trace)?;
    std::fs::write(&args.out, text).with_context(|| format!("writing {}", args.out.display()))?;
    println!("{}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

/// Find a run by `ID` (unique across the bundle) or `EXPERIMENT/CONFIGURATION/RUN`.
pub fn build_trace(bundle: &Bundle, wanted: &str) -> anyhow::Result<Value> {
    let mut found = Vec::new();
    for e in &bundle.experiments {
        for c in &e.configurations {
            for r in &c.runs {
                let full = format!("{}/{}/{}", e.id, c.id, r.id);
                if r.id == wanted || full == wanted {
                    found.push((full, r));
                }
            }
        }
    }
    let (name, run) = match found.len() {
        0 => anyhow::bail!(
            "no run {wanted:?} in the bundle; expected a run id or EXPERIMENT/CONFIGURATION/RUN"
        ),
        1 => found.remove(0),
        n => anyhow::bail!(
            "{n} runs are named {wanted:?}; expected EXPERIMENT/CONFIGURATION/RUN, e.g. {}",
            found[0].0
        ),
    };
    let steps: &StepSeries = run.steps.as_ref().with_context(|| {
        format!("run {name} has no per-step timings; expected a diagnostic run")
    })?;
    Ok(trace_of(&name, steps))
}

/// The trace events of a step series: steps laid end to end from t = 0.
pub fn trace_of(name: &str, s: &StepSeries) -> Value {
    let mut events = vec![json!({
        "ph": "M", "name": "process_name", "pid": 1, "tid": 0,
        "args": { "name": format!("stallscope {name} (diagnostic, synchronized at every stage)") }
    })];
    for (tid, stage) in STAGES.iter().enumerate() {
        events.push(json!({
            "ph": "M", "name": "thread_name", "pid": 1, "tid": tid + 1,
            "args": { "name": stage }
        }));
    }
    let mut t_ns: u64 = 0;
    for i in 0..s.next_wait_ns.len() {
        let durs = [s.next_wait_ns[i], s.transfer_ns[i], s.compute_ns[i]];
        for (tid, (stage, dur)) in STAGES.iter().zip(durs).enumerate() {
            events.push(json!({
                "ph": "X", "name": stage, "cat": "step", "pid": 1, "tid": tid + 1,
                "ts": t_ns as f64 / 1000.0, "dur": dur as f64 / 1000.0,
                "args": { "step": i }
            }));
            t_ns += dur;
        }
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_follow_each_other() {
        let s = StepSeries {
            next_wait_ns: vec![1000, 2000],
            transfer_ns: vec![500, 500],
            compute_ns: vec![3000, 3000],
            comm_ns: vec![],
        };
        let t = trace_of("x", &s);
        let ev: Vec<&Value> = t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .collect();
        assert_eq!(ev.len(), 6);
        assert_eq!(ev[1]["ts"], 1.0);
        assert_eq!(ev[2]["ts"], 1.5);
        assert_eq!(ev[3]["ts"], 4.5);
        assert_eq!(ev[3]["dur"], 2.0);
    }
}
