//! Dependencies a crate declares and never names: `[dependencies]` against
//! its library and binaries, `[dev-dependencies]` against those and its
//! tests, benches and examples, `[build-dependencies]` against `build.rs`.
//! A dependency kept for its features alone is listed, with why, under
//! `[package.metadata.cargo-machete] ignored` (cargo-machete's key).
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// One unused dependency: the manifest, its table and the crate.
#[derive(Debug, PartialEq)]
pub(crate) struct Unused {
    pub(crate) manifest: PathBuf,
    pub(crate) table: &'static str,
    pub(crate) name: String,
}

/// The unused dependencies of the package whose manifest is `manifest`.
pub(crate) fn unused(manifest: &Path) -> Result<Vec<Unused>> {
    let text = std::fs::read_to_string(manifest)
        .with_context(|| format!("reading {}", manifest.display()))?;
    let doc: toml::Table = text
        .parse()
        .with_context(|| format!("parsing {}", manifest.display()))?;
    let dir = manifest.parent().unwrap_or(Path::new("."));
    let ignored = ignored(&doc);
    let src = sources(&[dir.join("src")]);
    let dev = sources(&[
        dir.join("src"),
        dir.join("tests"),
        dir.join("benches"),
        dir.join("examples"),
    ]);
    let build = read(&dir.join("build.rs")).unwrap_or_default();
    let mut out = Vec::new();
    for (table, text) in [
        ("dependencies", src),
        ("dev-dependencies", dev),
        ("build-dependencies", build),
    ] {
        for name in declared(&doc, table) {
            if ignored.contains(&name) || names(&text, &name.replace('-', "_")) {
                continue;
            }
            out.push(Unused {
                manifest: manifest.to_path_buf(),
                table,
                name,
            });
        }
    }
    Ok(out)
}

fn ignored(doc: &toml::Table) -> Vec<String> {
    doc.get("package")
        .and_then(|p| p.get("metadata"))
        .and_then(|m| m.get("cargo-machete"))
        .and_then(|m| m.get("ignored"))
        .and_then(|i| i.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn declared(doc: &toml::Table, table: &str) -> Vec<String> {
    let mut names: Vec<String> = doc
        .get(table)
        .and_then(|t| t.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
    // Target-specific tables: [target.'cfg(...)'.dependencies].
    if let Some(targets) = doc.get("target").and_then(|t| t.as_table()) {
        for t in targets.values() {
            if let Some(d) = t.get(table).and_then(|d| d.as_table()) {
                names.extend(d.keys().cloned());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Whether `text` names the crate `ident`: `ident::`, `use ident`, `extern crate ident`.
pub(crate) fn names(text: &str, ident: &str) -> bool {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find(ident) {
        let at = from + i;
        let end = at + ident.len();
        let before_ok = at == 0 || !is_ident_byte(bytes[at - 1]);
        let after = &text[end..];
        let after_ok = after.starts_with("::")
            || (after.starts_with([';', ' ', ',', '}'])
                && (text[..at].trim_end().ends_with("use")
                    || text[..at].trim_end().ends_with("crate")));
        if before_ok && after_ok {
            return true;
        }
        from = end;
    }
    false
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The text of every `.rs` file under `roots` (recursively). A renamed
/// dependency (`key = { package = ... }`) is named in code by its key, as here.
fn sources(roots: &[PathBuf]) -> String {
    let mut out = String::new();
    for root in roots {
        walk(root, &mut out);
    }
    out
}

fn walk(path: &Path, out: &mut String) {
    if path.is_file() {
        if path.extension().is_some_and(|e| e == "rs") {
            out.push_str(&read(path).unwrap_or_default());
            out.push('\n');
        }
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        walk(&p, out);
    }
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    use super::names;

    #[test]
    fn a_crate_is_named_by_a_path_or_a_use() {
        assert!(names("let x = libc::kill(1, 2);", "libc"));
        assert!(names("use anyhow;\n", "anyhow"));
        assert!(names("use serde::{Serialize};", "serde"));
        assert!(!names("let libcx = 1; // libc", "libc"));
        assert!(!names("my_libc::f()", "libc"));
        assert!(!names("nothing here", "wgpu"));
    }
}
