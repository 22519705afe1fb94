//! Format 1.5: older bundles read as before (no limits, floor or forecast;
//! peaks with no per-process figure); the new fields round-trip; a crash
//! cause or a resource this build does not know is read only from a newer
//! minor, and refused at its path in a bundle of this minor or older; the
//! machine's limits are checked.

use std::path::Path;

use serde_json::{Value, json};
use stallscope_bundle::analysis::{crash_failure, failure_text};
use stallscope_bundle::*;

fn fixture(rel: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(rel);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn read(v: &Value) -> Result<Bundle, ReadError> {
    read_bundle(&serde_json::to_vec(v).unwrap())
}

/// The job fixture with its first configuration failed as `failure`, in
/// format 1.`minor`.
fn with_failure(minor: u32, failure: Value) -> Value {
    let mut v = fixture("measured/cpu-job-tune.json");
    v["schema_version"]["minor"] = minor.into();
    let c = &mut v["experiments"][1]["configurations"][0];
    c["runs"] = json!([]);
    c["failure"] = failure;
    v
}

#[test]
fn a_1_4_bundle_reads_with_none_of_the_new_fields() {
    let b = read(&fixture("measured/cpu-job-tune.json")).unwrap();
    assert_eq!(b.schema_version, SchemaVersion { major: 1, minor: 4 });
    assert_eq!(b.environment.limits, None);
    for e in &b.experiments {
        assert_eq!(e.noise_floor, None);
        for c in &e.configurations {
            assert_eq!(c.forecast, None);
            for r in &c.runs {
                for p in r.memory.iter().flat_map(|m| &m.processes) {
                    assert_eq!((p.peak_rss_bytes, p.uss_at_open_bytes), (None, None));
                }
            }
        }
    }
    // Written back, none of them appears (a per-process peak shares its
    // name with the CPU cost's parts, so it is held above, typed).
    let text = b.to_json_pretty();
    for field in ["\"limits\"", "noise_floor", "forecast", "uss_at_open"] {
        assert!(!text.contains(field), "{field}");
    }
}

#[test]
fn crashes_and_misfits_round_trip_and_read_as_one_line() {
    let crash = crash_failure(
        "RuntimeError: DataLoader worker (pid 917) is killed by signal: Killed. ",
        None,
        None,
    );
    let misfit = json!({
        "kind": "would_not_fit", "resource": "shared_memory",
        "needed_bytes": 131072000u64, "available_bytes": 33554432u64,
        "message": "would not fit: 125.0 MiB of shared memory in flight"
    });
    for failure in [serde_json::to_value(&crash).unwrap(), misfit] {
        let v = with_failure(5, failure.clone());
        let b = read(&v).unwrap_or_else(|e| panic!("{failure}: {e}"));
        let f = b.experiments[1].configurations[0].failure.clone().unwrap();
        assert_eq!(serde_json::to_value(&f).unwrap(), failure);
        let line = failure_text(&f);
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.starts_with("crashed: killed by SIGKILL, most likely for memory")
                || line.starts_with("not run, would not fit in shared memory (/dev/shm): needs 125.0 MiB, has 32.0 MiB"),
            "{line}"
        );
    }
}

#[test]
fn an_unknown_cause_or_resource_needs_a_newer_minor() {
    let cases = [
        (
            json!({"kind": "crashed", "cause": "cosmic_ray", "message": "a bit flipped"}),
            "cause",
            CrashCauseOrResource::Cause(CrashCause::Unknown("cosmic_ray".into())),
        ),
        (
            json!({"kind": "would_not_fit", "resource": "gpu_memory", "needed_bytes": 2,
                   "available_bytes": 1, "message": "needs 2 bytes"}),
            "resource",
            CrashCauseOrResource::Resource(Resource::Unknown("gpu_memory".into())),
        ),
    ];
    for (failure, field, unknown) in cases {
        for minor in [FORMAT_MINOR, 4] {
            let v = with_failure(minor, failure.clone());
            let at = format!("$.experiments[1].configurations[0].failure.{field}");
            for err in [
                read(&v).unwrap_err(),
                parse_bundle_located(&serde_json::to_vec(&v).unwrap()).unwrap_err(),
            ] {
                let msg = err.to_string();
                assert!(
                    msg.contains(&at) && msg.contains("unknown variant"),
                    "{msg}"
                );
            }
        }
        let b = read(&with_failure(FORMAT_MINOR + 1, failure.clone())).unwrap();
        let f = b.experiments[1].configurations[0].failure.clone().unwrap();
        match (&f, &unknown) {
            (Failure::Crashed { cause, .. }, CrashCauseOrResource::Cause(c)) => {
                assert_eq!(cause, c)
            }
            (Failure::WouldNotFit { resource, .. }, CrashCauseOrResource::Resource(r)) => {
                assert_eq!(resource, r)
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            failure,
            "written back as read"
        );
    }
}

#[derive(Debug)]
enum CrashCauseOrResource {
    Cause(CrashCause),
    Resource(Resource),
}

#[test]
fn limits_that_contradict_themselves_are_located() {
    let mut v = fixture("measured/cpu-job-tune.json");
    v["schema_version"]["minor"] = 5.into();
    let good = json!({
        "usable_cpus": 2, "affinity_cpus": 4, "cpu_quota_cores": 1.5,
        "cpu_quota_source": "/sys/fs/cgroup/cpu.max",
        "memory_limit_bytes": 2147483648u64, "memory_limit_source": "/sys/fs/cgroup/memory.max",
        "shm_total_bytes": 67108864, "shm_free_bytes": 60000000
    });
    v["environment"]["limits"] = good.clone();
    assert!(read(&v).is_ok(), "{:?}", read(&v).err());
    let edits = [
        (
            "usable_cpus",
            json!(4),
            "the smaller of the affinity count and the quota rounded up",
        ),
        (
            "cpu_quota_cores",
            json!(-1.0),
            "a finite, positive number of cores",
        ),
        (
            "cpu_quota_source",
            json!(null),
            "a source exactly when there is a figure",
        ),
        (
            "shm_free_bytes",
            json!(70000000),
            "free space at most the size of /dev/shm",
        ),
        ("memory_limit_bytes", json!(0), "a positive number of bytes"),
    ];
    for (key, value, says) in edits {
        let mut e = v.clone();
        e["environment"]["limits"][key] = value;
        let msg = read(&e).unwrap_err().to_string();
        let at = format!("$.environment.limits.{key}");
        assert!(msg.contains(&at) && msg.contains(says), "{key}: {msg}");
    }
}
