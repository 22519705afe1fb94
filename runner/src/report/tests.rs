//! The reports over the fixture bundles: the default fits 100 columns
//! (characters, not bytes) and still names every configuration and its key
//! figures; `--wide` keeps every column of the full table.

use std::path::{Path, PathBuf};

use stallscope_bundle::Bundle;
use stallscope_bundle::analysis::{TableOptions, compare_bundles, comparison_table};

use super::text::{WIDTH, width};
use super::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// Every bundle of fixtures/measured and fixtures/published, with its name.
fn fixture_bundles() -> Vec<(String, Bundle)> {
    let mut out = Vec::new();
    for dir in ["measured", "published"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for p in paths {
            let b = stallscope_core::read_bundle_file(&p).unwrap_or_else(|e| panic!("{e}"));
            out.push((
                format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()),
                b,
            ));
        }
    }
    assert!(
        out.len() >= 4,
        "expected the measured and published fixtures"
    );
    out
}

fn fixture(rel: &str) -> Bundle {
    stallscope_core::read_bundle_file(&fixtures().join(rel)).unwrap()
}

/// Lines longer than [`WIDTH`] characters, with their numbers.
fn too_long(text: &str) -> Vec<(usize, usize, &str)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| width(l) > WIDTH)
        .map(|(i, l)| (i + 1, width(l), l))
        .collect()
}

#[test]
fn the_default_report_of_every_fixture_fits_100_columns() {
    for (name, b) in fixture_bundles() {
        let out = render_bundle(&b, Style::Compact);
        assert!(too_long(&out).is_empty(), "{name}: {:#?}", too_long(&out));
        for e in &b.experiments {
            assert!(out.contains(&format!("[ {} — ", e.id)), "{name}: {}", e.id);
            if let Some(v) = stallscope_bundle::analysis::verdict(e) {
                let first_words: String = v
                    .headline
                    .split_whitespace()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" ");
                assert!(out.contains(&first_words), "{name}: verdict of {}", e.id);
            }
            for c in &e.configurations {
                // A long label is cut with `…`: its row starts with a prefix.
                let row = |l: &str| {
                    let l = l.trim_start();
                    l.starts_with(&c.label)
                        || l.split_once('…')
                            .is_some_and(|(cut, _)| cut.len() >= 20 && c.label.starts_with(cut))
                };
                assert!(
                    out.lines().any(row),
                    "{name}: no row for {}:\n{out}",
                    c.label
                );
            }
        }
    }
}

#[test]
fn the_default_report_shows_the_key_figures_with_their_modes() {
    let out = render_bundle(
        &fixture("measured/cpu-quickstart-quick.json"),
        Style::Compact,
    );
    // Whole-run throughput beside the diagnostic figure of each kind, each
    // heading saying its mode.
    for needle in [
        "whole-run, steady",
        "diagnostic, steady",
        "wait share",
        "step median",
        "compute median",
        "transfer median",
        "bandwidth",
        "*60,191/s",
        "base",
        "1.49×",
    ] {
        assert!(out.contains(needle), "{needle}:\n{out}");
    }
    // The full table's other columns are left to --wide.
    assert!(!out.contains("host peak RSS"), "{out}");
    let published = render_bundle(
        &fixture("published/fashionmnist-batch-sweep.json"),
        Style::Compact,
    );
    assert!(published.starts_with("PUBLISHED figures"), "{published}");
    assert!(
        published.contains("failed: batch 24,576: out of memory"),
        "{published}"
    );
}

#[test]
fn wide_keeps_every_column_of_the_full_table() {
    let b = fixture("measured/cpu-quickstart-quick.json");
    let wide = render_bundle(&b, Style::Wide);
    assert!(
        !too_long(&wide).is_empty(),
        "the full table of this fixture is wider than 100 columns"
    );
    for e in b
        .experiments
        .iter()
        .filter(|e| !e.configurations.is_empty())
    {
        let t = comparison_table(e, &TableOptions::default());
        assert!(t.columns.len() > 2, "{}", e.id);
        let header = wide
            .lines()
            .find(|l| {
                l.trim_start().starts_with("configuration ")
                    && l.contains(&t.columns[0].heading_with_unit())
            })
            .unwrap_or_else(|| panic!("{}: no header:\n{wide}", e.id));
        for c in &t.columns {
            assert!(
                wide.contains(&c.heading_with_unit()),
                "{}: {}",
                e.id,
                c.heading
            );
        }
        assert!(header.contains(&t.columns.last().unwrap().heading_with_unit()));
    }
    assert_eq!(wide, render_bundle_wide(&b));
}

#[test]
fn a_long_label_is_cut_with_an_ellipsis_and_keeps_its_figures() {
    // The fixture's loader row "2 processes", its label made as long as a
    // generated one can be: the experiment title appended.
    let mut b = fixture("measured/cpu-quickstart-quick.json");
    let e = b.experiments.iter_mut().find(|e| e.id == "loader").unwrap();
    let title = e.title.clone();
    let c = e
        .configurations
        .iter_mut()
        .find(|c| c.label == "2 processes")
        .unwrap();
    c.label = format!("2 processes — {title} — prefetch 2, not persistent, not pinned");
    let long = c.label.clone();
    assert!(width(&long) > 100);
    let out = render_bundle(&b, Style::Compact);
    assert!(too_long(&out).is_empty(), "{:#?}", too_long(&out));
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("2 processes — Loader"))
        .unwrap_or_else(|| panic!("no row:\n{out}"));
    assert!(row.contains('…') && !row.contains(&long), "{row}");
    assert!(
        row.contains("3,518/s") && row.contains("0.058×") && row.contains("1.2%"),
        "{row}"
    );
    // --wide keeps the label whole.
    assert!(render_bundle(&b, Style::Wide).contains(&long));
}

#[test]
fn the_default_comparison_fits_100_columns() {
    let measured = fixture("measured/cpu-quickstart-quick.json");
    let published = fixture("published/fashionmnist-batch-sweep.json");
    let (m, p) = (
        Path::new("measured/cpu-quickstart-quick.json"),
        Path::new("published/fashionmnist-batch-sweep.json"),
    );
    for (base, new, bp, np) in [
        (&published, &measured, p, m),
        (&measured, &published, m, p),
        (&measured, &measured, m, m),
    ] {
        let c = compare_bundles(base, new, 5.0);
        let out = render_comparison(&c, bp, np, Style::Compact);
        assert!(too_long(&out).is_empty(), "{:#?}", too_long(&out));
        assert!(out.contains("NEW/BASE"), "{out}");
    }
    let c = compare_bundles(&published, &measured, 5.0);
    let wide = render_comparison(&c, p, m, Style::Wide);
    assert!(!too_long(&wide).is_empty(), "the full comparison is wider");
    assert!(wide.contains("BASE fashionmnist-batch-sweep |"), "{wide}");
}

/// Fields of a CSV line (commas outside quotes + 1).
fn csv_fields(line: &str) -> usize {
    let mut quoted = false;
    let mut n = 1;
    for ch in line.chars() {
        match ch {
            '"' => quoted = !quoted,
            ',' if !quoted => n += 1,
            _ => {}
        }
    }
    n
}

#[test]
fn csv_and_json_hold_the_full_tables() {
    let b = fixture("measured/cpu-quickstart-quick.json");
    let csv = render_bundle(&b, Style::Csv);
    let header_fields = csv_fields(csv.lines().next().unwrap());
    assert_eq!(header_fields, 15);
    let mut cells = 0;
    for e in b
        .experiments
        .iter()
        .filter(|e| !e.configurations.is_empty())
    {
        let t = comparison_table(e, &TableOptions::default());
        cells += t.rows.len() * t.columns.len();
    }
    assert_eq!(csv.lines().count(), 1 + cells, "{csv}");
    assert!(csv.lines().all(|l| csv_fields(l) == header_fields), "{csv}");
    assert!(csv.contains("loader,w0-pin0,in loop (0 workers),wait share,diagnostic,steady,"));
    let json: serde_json::Value = serde_json::from_str(&render_bundle(&b, Style::Json)).unwrap();
    assert_eq!(
        json["experiments"].as_array().unwrap().len(),
        b.experiments.len()
    );
    assert_eq!(json["experiments"][4]["id"], "loader");
    assert!(
        json["experiments"][4]["verdict"]["headline"]
            .as_str()
            .unwrap()
            .starts_with("Fastest")
    );
    let md = render_bundle(&b, Style::Markdown);
    assert!(
        md.contains("### loader — ") && md.contains("| configuration |"),
        "{md}"
    );
}
