//! Data-driven tests over `fixtures/`: every good bundle reads and validates,
//! every bad input gets its located, one-paragraph message.

use std::path::{Path, PathBuf};

use stallscope_bundle::{ReadError, read_bundle};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

fn read_fixture(rel: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn every_good_fixture_reads_validates_and_round_trips() {
    let mut seen = 0;
    for dir in ["published", "measured", "newer-minor"] {
        for entry in std::fs::read_dir(fixtures().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let bundle = read_bundle(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let again = read_bundle(bundle.to_json_pretty().as_bytes()).unwrap();
            assert_eq!(bundle, again, "{} does not round-trip", path.display());
            seen += 1;
        }
    }
    assert!(
        seen >= 3,
        "expected the published and measured fixtures, saw {seen}"
    );
}

/// (file, fragments every message must contain)
const BAD: &[(&str, &[&str])] = &[
    ("truncated.json", &["line", "column", "truncated"]),
    (
        "wrong-types.json",
        &[
            "$.experiments[0].configurations[1].runs[0].whole_run.samples",
            "found string \"4096\"",
            "expected a non-negative integer",
            "$.experiments[0].configurations[2].runs[2].repeat",
        ],
    ),
    (
        "nan-as-string.json",
        &[
            "$.experiments[0].configurations[0].runs[1].diagnostic.next_wait.mean_s",
            "\"NaN\"",
            "JSON has no NaN",
        ],
    ),
    (
        "negative-seconds.json",
        &[
            "$.experiments[0].configurations[2].runs[0].whole_run.seconds",
            "found -",
            "non-negative number of seconds",
        ],
    ),
    (
        "newer-major.json",
        &["format 2.0", "newer than this build", "1.x"],
    ),
    ("deep-nesting.json", &["nesting deeper than 128", "line 1"]),
    (
        "diagnostic-without-stages.json",
        &[
            "$.experiments[0].configurations[0].runs[3].diagnostic",
            "a diagnostic run without stages",
            "expected statistics for next_wait",
        ],
    ),
    (
        "unknown-timing-mode.json",
        &[
            "$.experiments[0].configurations[0].runs[0].timing_mode",
            "unknown variant \"fast\"",
            "\"whole_run\"",
        ],
    ),
    (
        "duplicate-ids.json",
        &["$.experiments[0].configurations[1].id", "used twice"],
    ),
    (
        "rate-mismatch.json",
        &[
            "$.experiments[0].configurations[0].runs[0].whole_run.samples_per_s",
            "samples ÷ seconds",
        ],
    ),
    (
        "not-a-bundle.json",
        &[
            "at $",
            "found an array of 3 items",
            "expected a JSON object",
        ],
    ),
    ("empty.json", &["empty"]),
];

#[test]
fn every_bad_fixture_gets_its_located_message() {
    let listed: Vec<&str> = BAD.iter().map(|(f, _)| *f).collect();
    for entry in std::fs::read_dir(fixtures().join("bad")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            listed.contains(&name.as_str()),
            "fixtures/bad/{name} has no expectation in this test"
        );
    }
    for (file, fragments) in BAD {
        let err = read_bundle(&read_fixture(&format!("bad/{file}"))).expect_err(file);
        let msg = err.to_string();
        assert!(
            !msg.contains('\n'),
            "{file}: message should be one paragraph: {msg}"
        );
        for f in *fragments {
            assert!(msg.contains(f), "{file}: message lacks {f:?}:\n{msg}");
        }
    }
}

#[test]
fn wrong_types_reports_every_problem_not_just_the_first() {
    let err = read_bundle(&read_fixture("bad/wrong-types.json")).unwrap_err();
    match err {
        ReadError::Invalid(problems) => assert_eq!(problems.len(), 2, "{problems:#?}"),
        other => panic!("expected Invalid, got {other}"),
    }
}

#[test]
fn a_50_megabyte_file_is_refused_with_its_size() {
    let mut big = b"{\"title\": \"".to_vec();
    big.resize(50 * 1000 * 1000, b'x');
    big.extend_from_slice(b"\"}");
    let err = read_bundle(&big).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ReadError::TooLarge { .. }), "{msg}");
    assert!(
        msg.contains("50000002 bytes") && msg.contains("at most"),
        "{msg}"
    );
}

#[test]
fn a_newer_minor_with_unknown_fields_is_read() {
    let mut v: serde_json::Value =
        serde_json::from_slice(&read_fixture("measured/cpu-quickstart-quick.json")).unwrap();
    v["schema_version"]["minor"] = 7.into();
    v["a_field_from_the_future"] = serde_json::json!({"x": 1});
    v["experiments"][0]["configurations"][0]["runs"][0]["whole_run"]["joules"] = 3.5.into();
    let bundle = read_bundle(&serde_json::to_vec(&v).unwrap()).expect("newer minor reads");
    assert_eq!(bundle.schema_version.minor, 7);
}

#[test]
fn an_older_major_is_a_typed_error() {
    let mut v: serde_json::Value =
        serde_json::from_slice(&read_fixture("measured/cpu-quickstart-quick.json")).unwrap();
    v["schema_version"]["major"] = 0.into();
    let err = read_bundle(&serde_json::to_vec(&v).unwrap()).unwrap_err();
    assert!(matches!(err, ReadError::TooOld { .. }), "{err}");
}
