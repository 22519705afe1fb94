//! The tree's cost over generated lives of a tree and over real children:
//! the total is what the tree used, each live process is charged its own
//! time, and what ended in the window is its own part, whichever side of
//! the snapshot a process ended on.
use super::*;
use std::time::Duration;

use stallscope_loader::Rng;

fn t(user_s: f64) -> CpuTimes {
    CpuTimes {
        user_s,
        system_s: 0.0,
    }
}

fn p(pid: u32, own: f64, reaped: f64) -> TreeProcess {
    TreeProcess {
        pid,
        own: t(own),
        reaped: t(reaped),
        peak_rss_bytes: None,
    }
}

fn part<'c>(c: &'c CpuCost, name: &str) -> Option<&'c CpuPart> {
    c.parts.iter().find(|p| p.name == name)
}

fn cpu(p: &CpuPart) -> f64 {
    p.user_s + p.system_s
}

/// A tree in a generated life: the root, its children (pid, own, reaped
/// grandchildren), and what the root has reaped.
struct Life {
    root_own: f64,
    root_reaped: f64,
    kids: Vec<(u32, f64, f64)>,
}

impl Life {
    fn snap(&self, at: Instant) -> TreeSnapshot {
        TreeSnapshot {
            at,
            processes: std::iter::once(p(1, self.root_own, self.root_reaped))
                .chain(self.kids.iter().map(|&(pid, own, r)| p(pid, own, r)))
                .collect(),
        }
    }
}

/// What one generated window did: the root's own use, each surviving
/// child's own use, and the use of everything that ended in it.
#[derive(Default)]
struct Used {
    root: f64,
    alive: Vec<(u32, f64)>,
    ended: f64,
    anything_ended: bool,
}

/// One window of a generated life: every process uses CPU, children reap
/// grandchildren, some children end (reaped by the root), some are born,
/// some are born and end inside the window.
fn window(rng: &mut Rng, life: &mut Life, next_pid: &mut u32) -> Used {
    let mut u = Used::default();
    let tenth = |rng: &mut Rng, n: u64| rng.below(n) as f64 / 10.0;
    let own = tenth(rng, 100);
    life.root_own += own;
    u.root = own;
    for k in life.kids.iter_mut() {
        let more = tenth(rng, 100);
        let grandchild = if rng.coin() { tenth(rng, 30) } else { 0.0 };
        k.1 += more;
        k.2 += grandchild;
        u.alive.push((k.0, more));
        u.ended += grandchild;
    }
    let mut kept = Vec::new();
    for k in std::mem::take(&mut life.kids) {
        if rng.coin() {
            life.root_reaped += k.1 + k.2;
            let (pid, more) = u.alive.iter().copied().find(|a| a.0 == k.0).unwrap();
            u.alive.retain(|a| a.0 != pid);
            u.ended += more;
            u.anything_ended = true;
        } else {
            kept.push(k);
        }
    }
    life.kids = kept;
    for _ in 0..rng.below(3) {
        *next_pid += 1;
        let own = tenth(rng, 50);
        if rng.coin() {
            life.root_reaped += own;
            u.ended += own;
            u.anything_ended |= own > 0.0;
        } else {
            life.kids.push((*next_pid, own, 0.0));
            u.alive.push((*next_pid, own));
        }
    }
    u
}

#[test]
fn each_part_is_what_its_processes_used_whatever_ended() {
    let mut rng = Rng::new(5);
    let t0 = Instant::now();
    for case in 0..300 {
        let mut next_pid = 10;
        let mut life = Life {
            root_own: 1.0,
            root_reaped: 0.0,
            kids: Vec::new(),
        };
        let mut before = life.snap(t0);
        for w in 0..6u64 {
            let u = window(&mut rng, &mut life, &mut next_pid);
            let after = life.snap(t0 + Duration::from_millis(100 * (w + 1)));
            let c = tree_cost(&before, &after, 10, "harness");
            let at = format!("case {case} window {w}");
            let used = u.root + u.ended + u.alive.iter().map(|a| a.1).sum::<f64>();
            assert!((c.cpu_s - used).abs() < 1e-9, "{at}: {} vs {used}", c.cpu_s);
            assert!(
                (cpu(&c.parts[0]) - u.root).abs() < 1e-9,
                "{at}: the root's own"
            );
            for (pid, own) in &u.alive {
                let got = part(&c, &format!("child process (pid {pid})")).unwrap();
                assert!((cpu(got) - own).abs() < 1e-9, "{at}: pid {pid}");
            }
            match part(&c, ENDED_PART) {
                Some(e) => assert!((cpu(e) - u.ended).abs() < 1e-9, "{at}: ended"),
                None => assert!(!u.anything_ended && u.ended == 0.0, "{at}: no ended part"),
            }
            assert_eq!(
                c.parts.len(),
                1 + u.alive.len() + usize::from(u.ended > 0.0 || u.anything_ended),
                "{at}"
            );
            before = after;
        }
    }
}

/// The flaky order of events made exact: a harness with two persistent
/// workers, seen alive at the window's start; at its end both alive, one
/// or both already reaped into the harness. Every order charges the
/// harness its own time only and the workers all of theirs.
#[test]
fn workers_ended_before_the_snapshot_are_still_the_workers() {
    let t0 = Instant::now();
    let before = TreeSnapshot {
        at: t0,
        processes: vec![p(1, 2.0, 0.0), p(20, 1.0, 0.0), p(21, 1.5, 0.0)],
    };
    // In the window: the harness uses 0.5 s, the workers 3 s and 4 s.
    let (w20, w21) = (1.0 + 3.0, 1.5 + 4.0);
    let orders = [
        vec![p(1, 2.5, 0.0), p(20, w20, 0.0), p(21, w21, 0.0)],
        vec![p(1, 2.5, w20), p(21, w21, 0.0)],
        vec![p(1, 2.5, w20 + w21)],
    ];
    for (i, processes) in orders.into_iter().enumerate() {
        let alive = processes.len() - 1;
        let after = TreeSnapshot {
            at: t0 + Duration::from_secs(1),
            processes,
        };
        let c = tree_cost(&before, &after, 100, "harness");
        assert!(
            (cpu(&c.parts[0]) - 0.5).abs() < 1e-9,
            "order {i}: {:?}",
            c.parts
        );
        let workers: f64 = c.parts[1..].iter().map(cpu).sum();
        assert!((workers - 7.0).abs() < 1e-9, "order {i}: {:?}", c.parts);
        assert!((c.cpu_s - 7.5).abs() < 1e-9, "order {i}");
        assert_eq!(part(&c, ENDED_PART).is_some(), alive < 2, "order {i}");
    }
}

#[test]
fn a_real_child_is_found_and_counted() {
    let mut child = std::process::Command::new("sh")
        .args([
            "-c",
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 5",
        ])
        .spawn()
        .unwrap();
    let me = std::process::id();
    let before = TreeSnapshot::take(me);
    assert!(before.processes.iter().any(|p| p.pid == child.id()));
    std::thread::sleep(Duration::from_millis(300));
    let after = TreeSnapshot::take(me);
    let _ = child.kill();
    let _ = child.wait();
    let c = tree_cost(&before, &after, 0, "test");
    assert!(
        c.parts
            .iter()
            .any(|p| p.name.contains(&child.id().to_string()))
    );
    assert!(c.cpu_s >= 0.0 && c.cpu_s_per_1000_samples.is_none());
}

/// A real child that works and is reaped between two snapshots: its CPU
/// (as `wait4` reports it) is in the ended part, not in the root's.
#[test]
#[allow(
    clippy::zombie_processes,
    reason = "reaped with wait4, which also gives its rusage"
)]
fn a_real_child_reaped_in_the_window_is_in_the_ended_part() {
    let child = std::process::Command::new("sh")
        .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
        .spawn()
        .unwrap();
    let pid = child.id();
    let me = std::process::id();
    let before = TreeSnapshot::take(me);
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for; both pointers are live.
    let waited = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) };
    assert_eq!(
        waited,
        pid as i32,
        "wait4: {}",
        std::io::Error::last_os_error()
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let used = secs(usage.ru_utime) + secs(usage.ru_stime);
    let after = TreeSnapshot::take(me);
    let c = tree_cost(&before, &after, 0, "test");
    let ended = part(&c, ENDED_PART).unwrap_or_else(|| panic!("no ended part: {:?}", c.parts));
    // `/proc` counts whole clock ticks; the child's own time before the
    // first snapshot is not the window's. Other tests' children reaped in
    // the meantime only add.
    let tick = 1.0 / proc::clock_ticks();
    let early = before.find(pid).map_or(0.0, |b| b.total().total());
    assert!(used > 0.05, "the child used {used} s");
    assert!(
        cpu(ended) + 2.0 * tick >= used - early,
        "ended {} s, the child used {used} s ({early} s before the window)",
        cpu(ended)
    );
    assert!(!c.parts.iter().any(|p| p.name.contains(&pid.to_string())));
}

/// Over generated trees where some descendants have no readable peak
/// now (zombies, or ending as read), some of those known from the
/// earlier snapshot: the figure is the sum of the readable ones and the
/// known ones, never voided by one that is neither; with none, the
/// reaped figure.
#[test]
fn an_unreadable_worker_does_not_void_the_others_memory() {
    let mut rng = Rng::new(9);
    for case in 0..500 {
        let n = rng.below(6) as u32;
        let mut want = 0u64;
        let mut counted = 0;
        let (mut now, mut before) = (Vec::new(), Vec::new());
        for i in 0..=n {
            let peak = (i == 0 || rng.coin()).then(|| (1 + rng.below(1000)) << 20);
            let old = rng.coin().then(|| (1 + rng.below(1000)) << 20);
            if i > 0
                && let Some(b) = peak.or(old)
            {
                want += b;
                counted += 1;
            }
            now.push(TreeProcess {
                peak_rss_bytes: peak,
                ..p(i + 1, 1.0, 0.0)
            });
            before.push(TreeProcess {
                peak_rss_bytes: old,
                ..p(i + 1, 0.5, 0.0)
            });
        }
        let at = Instant::now();
        let snap = TreeSnapshot { at, processes: now };
        let earlier = TreeSnapshot {
            at,
            processes: before,
        };
        let reaped = rng.coin().then_some(7 << 20);
        let got = snap.descendants_peak_rss_bytes(Some(&earlier), reaped);
        if counted == 0 {
            assert_eq!(got, reaped, "case {case}");
        } else {
            assert_eq!(got, Some(want), "case {case}");
        }
    }
}
