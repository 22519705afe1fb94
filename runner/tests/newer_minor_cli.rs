//! A bundle of a newer minor with values this build does not know (an
//! experiment kind, an engine, a timing mode, a failure kind) is read,
//! validated and shown by the command line, not refused.

use std::process::Command;

fn stallscope(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const FIXTURE: &str = "fixtures/newer-minor/unknown-kind.json";

#[test]
fn validate_accepts_a_newer_minor_with_unknown_values() {
    let (code, out, err) = stallscope(&["validate", FIXTURE]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("valid — format 1.99"), "{out}");
}

#[test]
fn report_shows_the_unknown_kind_and_its_failure() {
    let (code, out, err) = stallscope(&["report", FIXTURE]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("[ tokenizer"), "{out}");
    assert!(
        out.contains("experiment kind \"tokenizer\" is from a newer format"),
        "{out}"
    );
    assert!(
        out.contains("cosmic_ray (a failure kind from a newer format)"),
        "{out}"
    );
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
}
