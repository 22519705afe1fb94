//! The faces check fails where it should: paths into private modules
//! (through uses, groups and macro bodies), public modules not listed, and
//! listed namespaces that do not keep the rule themselves.
use super::*;

/// The faces of one crate, `stallscope_core`, from its root's text and its
/// listed namespaces' texts.
fn faces_of(api: Api, root: &str, namespaces: &[(&str, &str)]) -> BTreeMap<String, Face> {
    let mut face = face_of(root).unwrap();
    for (ns, text) in namespaces {
        assert!(
            listed(api, "stallscope_core", ns),
            "{ns} is not in the test's api"
        );
        face.namespaces
            .insert(ns.to_string(), face_of(text).unwrap());
    }
    BTreeMap::from([("stallscope_core".to_string(), face)])
}

const CORE: &str = "//! The core.\nmod driver;\nmod measure;\npub use measure::run_epoch;\n";

fn found(api: Api, faces: &BTreeMap<String, Face>, text: &str) -> Vec<(usize, String)> {
    reach_ins(api, text, faces).unwrap()
}

#[test]
fn a_path_into_another_crates_module_is_a_reach_in() {
    let faces = faces_of(&[], CORE, &[]);
    let text = "use stallscope_core::driver::UnitCtx;\n\
                fn f() { let _ = stallscope_core::measure::run_epoch; }\n";
    assert_eq!(
        found(&[], &faces, text),
        [
            (1, "stallscope_core::driver::UnitCtx".to_string()),
            (2, "stallscope_core::measure::run_epoch".to_string()),
        ]
    );
    let module = "use stallscope_core::driver;\n";
    assert_eq!(
        found(&[], &faces, module).len(),
        1,
        "the module itself, imported"
    );
}

#[test]
fn use_groups_and_macro_bodies_are_read() {
    let faces = faces_of(&[], CORE, &[]);
    let text = "use stallscope_core::{run_epoch, driver::{drive, Outcome}};\n\
                fn f() {\n    assert!(matches!(x, stallscope_core::driver::Outcome::Done));\n}\n";
    assert_eq!(
        found(&[], &faces, text),
        [
            (1, "stallscope_core::driver::{…}".to_string()),
            (3, "stallscope_core::driver::Outcome::Done".to_string()),
        ]
    );
}

#[test]
fn root_exports_comments_and_strings_are_not_reach_ins() {
    let faces = faces_of(&[], CORE, &[]);
    let text = "use stallscope_core::{run_epoch, self};\n\
                // stallscope_core::driver::UnitCtx in a comment\n\
                /// and `stallscope_core::driver` in a doc\n\
                fn f() { let s = \"stallscope_core::driver::X\"; other::driver::X; }\n";
    assert!(found(&[], &faces, text).is_empty());
}

#[test]
fn an_item_named_like_its_private_module_is_the_item() {
    let job = "//! The job.\nmod run;\npub use run::run;\n";
    let faces = faces_of(&[], job, &[]);
    assert!(found(&[], &faces, "fn f() { stallscope_core::run(&o); }\n").is_empty());
    let into = "use stallscope_core::run::Helper;\n";
    assert_eq!(
        found(&[], &faces, into).len(),
        1,
        "a path past it is in the module"
    );
}

#[test]
fn a_public_module_not_listed_widens_the_face() {
    let lib = "//! The core.\npub mod driver;\nmod measure;\n";
    let wide = wide_root(&[], "stallscope_core", "runner/core/src/lib.rs", lib).unwrap();
    assert_eq!(wide.len(), 1);
    assert_eq!(wide[0].line, 2);
    assert!(
        wide[0].what.contains("`pub mod driver`"),
        "{}",
        wide[0].what
    );
    let narrow = "//! The core.\nmod driver;\nmod measure;\npub use driver::drive;\n";
    assert!(
        wide_root(&[], "stallscope_core", "x", narrow)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_listed_namespace_is_public_named_in_the_doc_and_narrow_itself() {
    let api: Api = &[("stallscope_core", "suite", "the suite's layers")];
    let good = "//! The core; `suite` is public: its layers are read by the command.\n\
                pub mod suite;\n";
    assert!(
        wide_root(api, "stallscope_core", "lib.rs", good)
            .unwrap()
            .is_empty()
    );
    let undocumented = "//! The core.\npub mod suite;\n";
    assert_eq!(
        wide_root(api, "stallscope_core", "lib.rs", undocumented)
            .unwrap()
            .len(),
        1
    );
    let private = "//! The core; `suite` is public.\nmod suite;\n";
    assert_eq!(
        wide_root(api, "stallscope_core", "lib.rs", private)
            .unwrap()
            .len(),
        1
    );

    let ns = "//! Suites.\nmod raw;\npub mod plan;\npub use raw::parse_suite;\n";
    let wide = wide_namespace("runner/core/src/suite/mod.rs", ns).unwrap();
    assert_eq!(wide.len(), 1);
    assert_eq!(
        (wide[0].line, wide[0].what.contains("`pub mod plan`")),
        (3, true)
    );

    let faces = faces_of(api, good, &[("suite", ns)]);
    let open = "use stallscope_core::suite::parse_suite;\nuse stallscope_core::suite::Plan;\n";
    assert!(
        found(api, &faces, open).is_empty(),
        "a listed namespace is open"
    );
    assert_eq!(
        found(&[], &faces, open).len(),
        2,
        "unlisted, it is a reach-in"
    );
    let deeper = "use stallscope_core::suite::{parse_suite, raw::RawSuite};\n";
    assert_eq!(
        found(api, &faces, deeper),
        [(1, "stallscope_core::suite::raw::RawSuite".to_string())]
    );
}
