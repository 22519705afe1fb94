//! Format 1.1 forward compatibility: a bundle of a newer minor with an
//! experiment kind, engine, timing mode and failure kind this build does not
//! know is read, validated, analysed and written back unchanged; the same
//! content claiming this build's minor is refused at each JSON path.

use std::path::{Path, PathBuf};

use stallscope_bundle::analysis::{
    TableOptions, comparison_table, failure_text, unknown_kind_note, verdict, verdict_in,
};
use stallscope_bundle::{
    Engine, ExperimentKind, FORMAT_MINOR, Failure, OpenEnum, ReadError, SchemaVersion, TimingMode,
    read_bundle,
};

const FIXTURE: &str = "newer-minor/unknown-kind.json";

fn fixture_bytes() -> Vec<u8> {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(FIXTURE);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn with_minor(minor: u32) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(&fixture_bytes()).unwrap();
    v["schema_version"]["minor"] = minor.into();
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn the_newer_minor_fixture_reads_and_validates_with_its_unknown_values() {
    let b = read_bundle(&fixture_bytes()).unwrap_or_else(|e| panic!("{FIXTURE}: {e}"));
    assert_eq!(
        b.schema_version,
        SchemaVersion {
            major: 1,
            minor: 99
        }
    );
    let tok = &b.experiments[0];
    assert_eq!(tok.kind, ExperimentKind::Unknown("tokenizer".into()));
    assert_eq!(
        b.experiments[1].kind,
        ExperimentKind::Loader,
        "mixed content"
    );
    assert_eq!(tok.configurations[0].engine, Some(Engine::Native));
    assert_eq!(
        tok.configurations[1].engine,
        Some(Engine::Unknown("jax_grain".into()))
    );
    assert_eq!(
        tok.configurations[1].runs[3].timing_mode,
        TimingMode::Unknown("sampled".into())
    );
    assert_eq!(
        tok.configurations[2].failure,
        Some(Failure::Unknown {
            kind: "cosmic_ray".into(),
            message: Some("a bit flipped in the generated data".into()),
        })
    );
    let w0 = &b.experiments[1].configurations[0];
    assert!(w0.not_applicable.contains_key("prefetch"));
    assert_eq!(w0.engine_or_native(), &Engine::Pytorch);
}

#[test]
fn unknown_values_survive_a_round_trip() {
    let b = read_bundle(&fixture_bytes()).unwrap();
    let text = b.to_json_pretty();
    for written in [
        "\"kind\": \"tokenizer\"",
        "\"engine\": \"jax_grain\"",
        "\"timing_mode\": \"sampled\"",
        "\"kind\": \"cosmic_ray\"",
        "\"message\": \"a bit flipped in the generated data\"",
    ] {
        assert!(text.contains(written), "{written} lost:\n{text}");
    }
    let again = read_bundle(text.as_bytes()).unwrap();
    assert_eq!(b, again);
}

#[test]
fn the_same_content_at_this_builds_minor_is_refused_at_every_path() {
    for minor in [FORMAT_MINOR, 0] {
        let err = read_bundle(&with_minor(minor)).unwrap_err();
        let ReadError::Invalid(problems) = &err else {
            panic!("expected Invalid, got {err}");
        };
        let msg = err.to_string();
        assert!(!msg.contains('\n'), "one paragraph: {msg}");
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "$.experiments[0].kind",
                "$.experiments[0].configurations[1].engine",
                "$.experiments[0].configurations[1].runs[3].timing_mode",
                "$.experiments[0].configurations[2].engine",
                "$.experiments[0].configurations[2].failure.kind",
            ],
            "{msg}"
        );
        let newer = format!("read only from a bundle newer than format 1.{FORMAT_MINOR}");
        for fragment in [
            "unknown variant \"tokenizer\"",
            "\"batch_sweep\"",
            "unknown variant \"jax_grain\"",
            "\"pytorch\"",
            "unknown variant \"sampled\"",
            "\"whole_run\"",
            "unknown variant \"cosmic_ray\"",
            "\"out_of_memory\"",
            newer.as_str(),
        ] {
            assert!(msg.contains(fragment), "lacks {fragment:?}: {msg}");
        }
    }
}

#[test]
fn an_unknown_kind_gets_a_plain_table_and_a_generic_verdict() {
    let b = read_bundle(&fixture_bytes()).unwrap();
    let tok = &b.experiments[0];
    let note = unknown_kind_note(tok, Some(b.schema_version)).unwrap();
    assert_eq!(
        note,
        "experiment kind \"tokenizer\" is from a newer format (1.99); shown as a plain table"
    );
    assert_eq!(
        unknown_kind_note(&b.experiments[1], Some(b.schema_version)),
        None
    );
    let v = verdict(tok).unwrap();
    assert!(
        v.headline.contains(&format!(
            "\"tokenizer\" is from a newer format (newer than 1.{FORMAT_MINOR})"
        )),
        "{v:?}"
    );
    assert_eq!(verdict_in(tok, b.schema_version).unwrap().headline, note);
    assert!(
        v.figure.starts_with("whole-run"),
        "rests on the fastest: {v:?}"
    );

    let t = comparison_table(tok, &TableOptions::default());
    let headings: Vec<&str> = t.columns.iter().map(|c| c.heading.as_str()).collect();
    assert!(
        headings.contains(&"samples/s (whole-run, steady)"),
        "{headings:?}"
    );
    assert!(
        t.columns.iter().all(|c| c.key.mode.unknown().is_none()),
        "no column of an unknown mode"
    );
    // The "sampled" run is in no figure, and the table says so.
    let t4 = &t.rows[1];
    let rate = t4.cells[0].as_ref().unwrap();
    assert_eq!(rate.summary.n, 2, "the two steady whole-run runs only");
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("timing mode \"sampled\"") && n.contains("in no figure")),
        "{:?}",
        t.notes
    );
    let failed = t.rows[2].failure.as_deref().unwrap();
    assert_eq!(
        failed,
        "cosmic_ray (a failure kind from a newer format): a bit flipped in the generated data"
    );
    let md = t.to_markdown();
    assert!(md.contains("timing mode \"sampled\""), "{md}");
}

#[test]
fn a_knob_that_does_not_apply_is_a_dash_with_its_reason() {
    let b = read_bundle(&fixture_bytes()).unwrap();
    let t = comparison_table(&b.experiments[1], &TableOptions::default());
    let w0 = &t.rows[0];
    assert_eq!(
        w0.params,
        [
            ("workers".to_string(), "0".to_string()),
            ("prefetch".to_string(), "—".to_string())
        ]
    );
    assert_eq!(
        w0.not_applicable,
        [(
            "prefetch".to_string(),
            "no worker processes or threads: prefetch applies only with workers > 0".to_string()
        )]
    );
    assert!(t.rows[1].not_applicable.is_empty());
    let foot = "— prefetch does not apply to in-loop (workers 0): no worker processes or threads: prefetch applies only with workers > 0";
    assert_eq!(t.footnotes(), [foot.to_string()]);
    assert!(t.to_markdown().contains(foot), "{}", t.to_markdown());
    let csv = t.to_csv();
    assert!(csv.starts_with("configuration,workers,prefetch,"), "{csv}");
    assert!(csv.contains("in-loop (workers 0),0,—,"), "{csv}");
    assert!(
        failure_text(&Failure::Unknown {
            kind: "x".into(),
            message: None
        })
        .starts_with("x (a failure kind")
    );
}

#[test]
fn a_swept_knob_is_a_value_or_a_reason_never_both_or_neither() {
    let mut v: serde_json::Value = serde_json::from_slice(&fixture_bytes()).unwrap();
    let configs = &mut v["experiments"][1]["configurations"];
    // w0: prefetch both as a value and as not applicable.
    configs[0]["params"]["prefetch"] = 2.into();
    // w2: prefetch neither.
    configs[1]["params"]
        .as_object_mut()
        .unwrap()
        .remove("prefetch");
    // w2: a reason for a knob that is not swept.
    configs[1]["not_applicable"] = serde_json::json!({"pinned": "no device to pin for"});
    let err = read_bundle(&serde_json::to_vec(&v).unwrap()).unwrap_err();
    let msg = err.to_string();
    for fragment in [
        "at $.experiments[1].configurations[0].not_applicable.prefetch: the swept parameter \"prefetch\" has a value in `params` and is also marked not applicable",
        "at $.experiments[1].configurations[1].params: the swept parameter \"prefetch\" is missing",
        "or the reason it does not apply in `not_applicable`",
        "at $.experiments[1].configurations[1].not_applicable.pinned: \"pinned\" is not a swept parameter",
    ] {
        assert!(msg.contains(fragment), "lacks {fragment:?}: {msg}");
    }
}
