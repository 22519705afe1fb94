//! The JSON Schema of the bundle format, generated from the types
//! (feature `schema`); checked into `fixtures/schema/` and kept in step by a test.

/// The schema as pretty JSON with a trailing newline.
pub fn bundle_schema_json() -> String {
    let schema = schemars::schema_for!(crate::format::Bundle);
    let mut s = serde_json::to_string_pretty(&schema).expect("a schema serializes");
    s.push('\n');
    s
}
