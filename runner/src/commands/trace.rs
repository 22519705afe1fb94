//! `stallscope trace`: the per-step timeline of one diagnostic run as Chrome
//! trace-event JSON (`ph: "X"` events per stage, µs), to open in Perfetto or
//! chrome://tracing. When the run kept worker tracks (the native loader's
//! workers, format 1.4), each worker has its own track beside the loop's
//! (see [`workers`]), and the loop's steps sit on the loader's clock.

mod workers;

use workers::us;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};
use stallscope_bundle::{Bundle, StepSeries, WorkerTracks};

use stallscope_core::read_bundle_file;

#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// The bundle (JSON).
    pub bundle: PathBuf,
    /// The diagnostic run: its id when unique, else EXPERIMENT/CONFIGURATION/RUN.
    #[arg(long)]
    pub run: String,
    /// The trace file to write (JSON).
    #[arg(long)]
    pub out: PathBuf,
}

/// Stage names in step order, with their thread id in the trace.
const STAGES: [&str; 3] = ["next_wait", "transfer", "compute"];

pub fn run(args: &TraceArgs) -> anyhow::Result<ExitCode> {
    let bundle =
        read_bundle_file(&args.bundle).map_err(|e| anyhow::anyhow!(e.paragraphs().join("\n")))?;
    let trace = build_trace(&bundle, &args.run)?;
    let text = serde_json::to_string(&trace)?;
    std::fs::write(&args.out, text).with_context(|| format!("writing {}", args.out.display()))?;
    crate::outln!("{}", args.out.display());
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
    Ok(trace_of(&name, steps, run.worker_tracks.as_ref()))
}

/// The trace events of a step series: steps laid end to end from t = 0, or,
/// with worker tracks, each step's next-wait ending when the loader handed
/// its batch over, and a track per worker.
pub fn trace_of(name: &str, s: &StepSeries, tracks: Option<&WorkerTracks>) -> Value {
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
    let tracks = tracks.map(workers::Tracks::new);
    if let Some(t) = &tracks {
        events.extend(t.events());
    }
    let mut t_ns: u64 = 0;
    for i in 0..s.next_wait_ns.len() {
        let durs = [s.next_wait_ns[i], s.transfer_ns[i], s.compute_ns[i]];
        let mut args = json!({ "step": i });
        if let Some(t) = &tracks {
            t_ns = t.step_start(i, t_ns, durs[0]);
            t.step_args(i, &mut args);
        }
        for (tid, (stage, dur)) in STAGES.iter().zip(durs).enumerate() {
            events.push(json!({
                "ph": "X", "name": stage, "cat": "step", "pid": 1, "tid": tid + 1,
                "ts": us(t_ns), "dur": us(dur), "args": args
            }));
            if let Some(t) = tracks.as_ref().filter(|_| tid == 0) {
                events.extend(t.flow_end(&args, t_ns));
            }
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
        let t = trace_of("x", &s, None);
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

    fn two_workers() -> WorkerTracks {
        use stallscope_bundle::{TrackBatches, TrackSamples, TrackStage, TrackSteps};
        WorkerTracks {
            kind: "processes".into(),
            workers: 2,
            batches: TrackBatches {
                batch: vec![0, 1],
                worker: vec![0, 1],
                start_ns: vec![1_000, 1_000],
                build_ns: vec![5_000, 9_000],
                collate_ns: vec![500, 500],
                handover_start_ns: vec![6_100, 10_100],
                handover_ns: vec![200, 200],
                samples: vec![2, 2],
                first_sample: vec![4, 9],
                sample_rows: vec![2, 2],
            },
            samples: TrackSamples {
                index: vec![4, 5, 9, 8],
                start_ns: vec![1_000, 3_000, 1_000, 5_000],
                stages: vec![TrackStage {
                    name: "read".into(),
                    ns: vec![2_000, 2_000, 4_000, 4_000],
                }],
                bad: vec![],
            },
            steps: TrackSteps {
                batch: vec![0, 1],
                delivered_ns: vec![6_500, 10_500],
            },
            ..WorkerTracks::default()
        }
    }

    #[test]
    fn worker_tracks_get_a_track_each_and_steps_sit_on_the_loaders_clock() {
        let s = StepSeries {
            next_wait_ns: vec![6_000, 3_000],
            transfer_ns: vec![100, 100],
            compute_ns: vec![900, 900],
            comm_ns: vec![],
        };
        let t = trace_of("x", &s, Some(&two_workers()));
        let ev = t["traceEvents"].as_array().unwrap();
        let names: Vec<&str> = ev
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .collect();
        assert!(names.contains(&"worker 0 (process)") && names.contains(&"worker 1 (process)"));
        let on = |tid: u64, cat: &str| {
            ev.iter()
                .filter(|e| e["ph"] == "X" && e["tid"] == tid && e["cat"] == cat)
                .count()
        };
        assert_eq!((on(100, "batch"), on(101, "batch")), (1, 1));
        assert_eq!((on(100, "sample"), on(101, "stage")), (2, 3));
        // The second step's wait ends when batch 1 was delivered: 10.5 µs.
        let waits: Vec<&Value> = ev
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == "next_wait")
            .collect();
        assert_eq!(waits[0]["ts"], 0.5);
        assert_eq!(waits[1]["ts"], 7.5);
        assert_eq!(waits[1]["args"]["worker"], 1);
        assert_eq!(waits[1]["args"]["samples"], json!([9, 8]));
        let flows = |ph: &str| ev.iter().filter(|e| e["ph"] == ph).count();
        assert_eq!((flows("s"), flows("f")), (2, 2));
    }
}
