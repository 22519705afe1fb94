//! The limits read from the fixture trees in `fixtures/cgroup/` (see its
//! README), and from this machine.

use super::*;

const MIB: u64 = 1024 * 1024;

fn tree(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/cgroup")
        .join(name)
}

#[test]
fn v2_quota_and_a_parents_memory_limit() {
    let l = read_limits_under(&tree("v2-quota"), 4, Some((64 * MIB, 60 * MIB)));
    assert_eq!(l.cpu_quota_cores, Some(1.5));
    assert_eq!(
        l.cpu_quota_source.as_deref(),
        Some("/sys/fs/cgroup/user.slice/job.scope/cpu.max")
    );
    assert_eq!(
        l.usable_cpus, 2,
        "1.5 CPUs rounded up, under an affinity of 4"
    );
    assert_eq!(l.affinity_cpus, Some(4));
    assert_eq!(l.memory_limit_bytes, Some(2 << 30));
    assert_eq!(
        l.memory_limit_source.as_deref(),
        Some("/sys/fs/cgroup/user.slice/memory.max")
    );
    assert_eq!(
        (l.shm_total_bytes, l.shm_free_bytes),
        (Some(64 * MIB), Some(60 * MIB))
    );
    assert_eq!(l.notes, Vec::<String>::new());
    // An affinity of one CPU binds below the quota.
    assert_eq!(read_limits_under(&tree("v2-quota"), 1, None).usable_cpus, 1);
}

#[test]
fn v2_unlimited_falls_back_to_the_affinity_and_physical_memory() {
    let l = read_limits_under(&tree("v2-unlimited"), 8, None);
    assert_eq!((l.usable_cpus, l.cpu_quota_cores), (8, None));
    assert_eq!(l.cpu_quota_source, None);
    assert_eq!(l.memory_limit_bytes, Some(16_384_000 * 1024));
    assert_eq!(
        l.memory_limit_source.as_deref(),
        Some("/proc/meminfo MemTotal")
    );
    let notes = l.notes.join("\n");
    assert!(
        notes.contains("no CPU quota in force (/sys/fs/cgroup/cpu.max"),
        "{notes}"
    );
    assert!(notes.contains("no cgroup memory limit"), "{notes}");
    assert!(notes.contains("/dev/shm could not be read"), "{notes}");
}

#[test]
fn v1_quota_inside_a_container_without_a_cgroup_namespace() {
    let l = read_limits_under(&tree("v1-quota"), 2, None);
    assert_eq!(l.cpu_quota_cores, Some(0.5));
    assert_eq!(
        l.cpu_quota_source.as_deref(),
        Some("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us")
    );
    assert_eq!(l.usable_cpus, 1, "half a CPU is one CPU to keep busy");
    assert_eq!(l.memory_limit_bytes, Some(512 * MIB));
    assert_eq!(
        l.memory_limit_source.as_deref(),
        Some("/sys/fs/cgroup/memory/memory.limit_in_bytes")
    );
}

#[test]
fn v1_unlimited_reads_the_sentinel_as_no_limit_at_every_level() {
    let l = read_limits_under(&tree("v1-unlimited"), 2, None);
    assert_eq!((l.usable_cpus, l.cpu_quota_cores), (2, None));
    assert_eq!(l.memory_limit_bytes, Some(24_683_664 * 1024));
    assert_eq!(
        l.memory_limit_source.as_deref(),
        Some("/proc/meminfo MemTotal")
    );
    let notes = l.notes.join("\n");
    assert!(
        notes.contains("/sys/fs/cgroup/memory/process_api/4e39/memory.limit_in_bytes"),
        "the nested path is where reading starts: {notes}"
    );
    assert!(
        notes.contains("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
        "{notes}"
    );
}

#[test]
fn a_missing_tree_gives_the_affinity_and_says_why() {
    for root in [tree("missing"), tree("no-such-folder")] {
        let l = read_limits_under(&root, 3, None);
        assert_eq!((l.usable_cpus, l.affinity_cpus), (3, Some(3)));
        assert_eq!((l.cpu_quota_cores, l.memory_limit_bytes), (None, None));
        let notes = l.notes.join("\n");
        assert!(
            notes.contains("/proc/self/cgroup could not be read"),
            "{notes}"
        );
        assert!(notes.contains("no MemTotal"), "{notes}");
    }
    assert_eq!(read_limits_under(&tree("missing"), 0, None).usable_cpus, 1);
}

#[test]
fn a_limit_above_the_physical_memory_is_the_physical_memory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("proc/self")).unwrap();
    std::fs::create_dir_all(root.join("sys/fs/cgroup")).unwrap();
    std::fs::write(root.join("proc/self/cgroup"), "0::/\n").unwrap();
    std::fs::write(root.join("proc/meminfo"), "MemTotal: 1024 kB\n").unwrap();
    std::fs::write(root.join("sys/fs/cgroup/memory.max"), "1048577\n").unwrap();
    let l = read_limits_under(root, 1, None);
    assert_eq!(l.memory_limit_bytes, Some(1024 * 1024));
    assert_eq!(
        l.memory_limit_source.as_deref(),
        Some("/proc/meminfo MemTotal")
    );
    assert!(
        l.notes
            .iter()
            .any(|n| n.contains("above the physical memory"))
    );
}

#[test]
fn this_machine_has_limits_a_bundle_accepts() {
    let l = read_limits();
    assert!(l.usable_cpus >= 1);
    assert!(l.affinity_cpus.is_some_and(|a| a >= l.usable_cpus));
    let (total, free) = (l.shm_total_bytes.unwrap(), l.shm_free_bytes.unwrap());
    assert!(total > 0 && free <= total, "{total} {free}");
    assert!(l.memory_limit_bytes.is_some_and(|m| m > 0));
    let mut b = stallscope_bundle::Bundle {
        schema_version: stallscope_bundle::SchemaVersion::CURRENT,
        id: "limits".into(),
        title: "limits".into(),
        created_at: "2026-12-05T00:00:00Z".into(),
        provenance: stallscope_bundle::Provenance::Published {
            citation: stallscope_bundle::Citation {
                title: "this machine".into(),
                ..Default::default()
            },
            conditions: Vec::new(),
        },
        environment: Default::default(),
        experiments: Vec::new(),
        status: stallscope_bundle::RunStatus {
            state: stallscope_bundle::RunState::Complete,
            message: None,
        },
        ranks: Vec::new(),
        notes: Vec::new(),
    };
    b.environment.limits = Some(l);
    assert_eq!(stallscope_bundle::validate(&b), vec![]);
}
