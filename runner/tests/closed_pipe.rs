//! Every printing command, piped into a reader that closes early (`| head
//! -c 10`, or a reader gone before the first write): it ends quietly, with
//! status 0 or by SIGPIPE (141 in a shell, as `yes | head` does), and
//! nothing on stderr: no panic, no "Broken pipe", no backtrace. That makes
//! `compare` usable as a CI gate under `set -o pipefail`.

#[allow(dead_code)]
mod util;

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use util::{stallscope, temp_dir};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/measured")
        .join(name)
        .display()
        .to_string()
}

/// Run `args`, read `keep` bytes of stdout (none: close it at once), then
/// close it; the status and stderr once the command has ended.
fn closed_early(args: &[&str], keep: usize) -> (std::process::ExitStatus, String) {
    let mut c: Command = stallscope();
    let mut child = c
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start stallscope");
    let mut out = child.stdout.take().unwrap();
    if keep > 0 {
        let mut buf = vec![0u8; keep];
        let _ = out.read_exact(&mut buf);
    }
    drop(out);
    let o = child.wait_with_output().unwrap();
    (o.status, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Quiet: status 0 or SIGPIPE, and nothing on stderr but the line that
/// says where the bundle is (a Markdown, CSV or JSON report, which fits in
/// the pipe's buffer, ends by saying it there to keep stdout that format).
fn check(what: &str, args: &[&str], keep: usize) {
    let (status, stderr) = closed_early(args, keep);
    let quiet = status.success() || status.signal() == Some(libc::SIGPIPE);
    assert!(quiet, "{what}: ended with {status:?}; stderr:\n{stderr}");
    let other: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("bundle: "))
        .collect();
    assert!(other.is_empty(), "{what}: wrote on stderr:\n{stderr}");
}

#[test]
fn report_and_compare_end_quietly_when_their_reader_goes() {
    let big = fixture("cpu-peers-seeds000-quick.json");
    let other = fixture("cpu-quickstart-quick.json");
    for format in ["table", "markdown", "csv", "json"] {
        for keep in [0, 10] {
            check(
                &format!("report --format {format}, {keep} bytes read"),
                &["report", &big, "--format", format],
                keep,
            );
        }
    }
    check("report --wide", &["report", &big, "--wide"], 10);
    for keep in [0, 10] {
        check("compare", &["compare", &other, &big], keep);
        check("compare --json", &["compare", &other, &big, "--json"], keep);
    }
}

#[test]
fn the_other_printing_commands_end_quietly_too() {
    let big = fixture("cpu-peers-seeds000-quick.json");
    let job = fixture("cpu-job-tune.json");
    check("validate", &["validate", &big, &job], 0);
    check("validate --json", &["validate", &big, &job, "--json"], 0);
    check("env --json", &["env", "--json", "--device", "cpu"], 0);
    check("env", &["env", "--device", "cpu"], 0);
    let dir = temp_dir("closed-pipe");
    let site = dir.path().join("site");
    check(
        "site",
        &["site", &big, &job, "--out", site.to_str().unwrap()],
        0,
    );
    let run = "cpu-peers-seeds000-quick.json";
    let b = util::valid_bundle(Path::new(&fixture(run)));
    let diag = b
        .experiments
        .iter()
        .flat_map(|e| {
            e.configurations
                .iter()
                .flat_map(move |c| c.runs.iter().map(move |r| (e, c, r)))
        })
        .find(|(_, _, r)| r.diagnostic.is_some())
        .map(|(e, c, r)| format!("{}/{}/{}", e.id, c.id, r.id))
        .expect("a diagnostic run in the fixture");
    let trace = dir.path().join("trace.json");
    check(
        "trace",
        &[
            "trace",
            &big,
            "--run",
            &diag,
            "--out",
            trace.to_str().unwrap(),
        ],
        0,
    );
    let tiny = util::write_suite(dir.path(), "tiny.toml", util::TINY_SUITE);
    let out = dir.path().join("run");
    check(
        "run",
        &[
            "run",
            tiny.to_str().unwrap(),
            "--device",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ],
        0,
    );
}
