//! Tests of the comparison table: headings, units, the best marks.
use super::*;
use crate::read_bundle;

const TUTORIAL: &str =
    include_str!("../../../../fixtures/published/pytorch-data-loading-tutorial.json");
const RANKED: &str = include_str!("../../../../fixtures/measured/cpu-quickstart-quick.json");

#[test]
fn a_run_of_ten_epochs_is_headed_so() {
    let b = read_bundle(TUTORIAL.as_bytes()).unwrap();
    let e = &b.experiments[0];
    assert_eq!(epochs_per_run(e), Some(10));
    let t = comparison_table(e, &TableOptions::default());
    let heads: Vec<String> = t.columns.iter().map(Column::heading_with_unit).collect();
    assert!(
        heads.iter().any(|h| h.starts_with("10 epochs (whole-run")),
        "{heads:?}"
    );
    assert!(!heads.iter().any(|h| h.starts_with("epoch")), "{heads:?}");
}

#[test]
fn one_time_unit_per_table_and_a_best_only_among_several() {
    let b = read_bundle(RANKED.as_bytes()).unwrap();
    for e in &b.experiments {
        let t = comparison_table(e, &TableOptions::default());
        let times: Vec<&str> = t
            .columns
            .iter()
            .filter(|c| c.key.metric.quantity() == Quantity::Duration)
            .map(|c| c.unit.suffix)
            .collect();
        assert!(
            times.windows(2).all(|w| w[0] == w[1]),
            "{}: {times:?}",
            e.id
        );
        for (i, c) in t.columns.iter().enumerate() {
            let with_value = t.rows.iter().filter(|r| r.cells[i].is_some()).count();
            let starred = t
                .rows
                .iter()
                .any(|r| r.cells[i].as_ref().is_some_and(|c| c.best));
            assert!(
                with_value > 1 || !starred,
                "{}: {} starred alone",
                e.id,
                c.heading
            );
        }
    }
    let mut one = b.experiments[0].clone();
    one.configurations.truncate(1);
    let t = comparison_table(&one, &TableOptions::default());
    assert!(t.rows[0].cells.iter().flatten().all(|c| !c.best));
    // Two equal values are no choice either.
    let mut same = b.experiments[0].clone();
    let twin = same.configurations[0].clone();
    same.configurations[1].runs = twin.runs;
    let t = comparison_table(&same, &TableOptions::default());
    assert!(
        t.rows
            .iter()
            .flat_map(|r| r.cells.iter().flatten())
            .all(|c| !c.best)
    );
}
