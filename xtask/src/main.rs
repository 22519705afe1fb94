//! `cargo xtask <task>`: setup, test, demo, bench, schema.
fn main() -> anyhow::Result<()> {
    anyhow::bail!("xtask: being written")
}
