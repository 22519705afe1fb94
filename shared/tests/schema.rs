//! The JSON Schema in fixtures/schema/ must match the types: this test fails
//! when a field is added without regenerating it (`cargo xtask schema`).

use std::path::Path;

#[test]
fn checked_in_schema_matches_the_types() {
    let generated = stallscope_bundle::schema::bundle_schema_json();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/schema/bundle.schema.json");
    if std::env::var_os("STALLSCOPE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "fixtures/schema/bundle.schema.json is out of date with shared/src/format.rs: run `cargo xtask schema` and commit the result"
    );
}
