//! The seams between crates that their manifests and sources must keep
//! (ARCHITECTURE.md, "Crates and who may depend on whom"): the format crate
//! depends on no other crate of ours and touches no filesystem, process or
//! network; the viewer depends on the format crate alone and never sets raw
//! HTML; only the back ends link a device library (`tch`, `wgpu`).
use std::path::Path;

/// Each crate directory and the workspace crates it may depend on.
pub(crate) const DEPENDS: &[(&str, &[&str])] = &[("shared", &[]), ("web", &["stallscope-bundle"])];

/// The device libraries, and the crates that may link them.
pub(crate) const DEVICES: &[(&str, &[&str])] =
    &[("tch", &["runner/torch"]), ("wgpu", &["runner/wgpu"])];

/// What the format crate's product code must not name, and why.
pub(crate) const FORMAT_FORBIDS: &[&str] = &["std::fs", "std::process", "std::net", "File::"];

/// The `[dependencies]` names of a manifest's text.
pub(crate) fn dependencies(manifest: &str) -> Vec<String> {
    let Ok(doc) = manifest.parse::<toml::Table>() else {
        return Vec::new();
    };
    doc.get("dependencies")
        .and_then(|d| d.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

/// The findings of crate `dir` whose manifest is `manifest`.
pub(crate) fn manifest_findings(dir: &str, manifest: &str) -> Vec<String> {
    let deps = dependencies(manifest);
    let mut out = Vec::new();
    if let Some((_, allowed)) = DEPENDS.iter().find(|(d, _)| *d == dir) {
        for d in deps.iter().filter(|d| d.starts_with("stallscope")) {
            if !allowed.contains(&d.as_str()) {
                out.push(format!(
                    "seam: {dir}/Cargo.toml depends on {d} (it may depend on {})",
                    if allowed.is_empty() {
                        "no crate of ours".to_string()
                    } else {
                        allowed.join(", ")
                    }
                ));
            }
        }
    }
    for (lib, owners) in DEVICES {
        if deps.iter().any(|d| d == lib) && !owners.contains(&dir) {
            out.push(format!(
                "seam: {dir}/Cargo.toml links {lib} (only {} may: the back ends know devices)",
                owners.join(", ")
            ));
        }
    }
    out
}

/// The findings of a product source file `rel` with `text`.
pub(crate) fn source_findings(rel: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    for (i, line) in code.lines().enumerate() {
        let l = line.trim_start();
        if l.starts_with("//") {
            continue;
        }
        if rel.starts_with("shared/src/") {
            for f in FORMAT_FORBIDS.iter().filter(|f| l.contains(*f)) {
                out.push(format!(
                    "seam: {rel}:{} names {f} (the format crate touches no filesystem, process \
                     or network)",
                    i + 1
                ));
            }
        }
        if rel.starts_with("web/src/") && l.contains("inner_html") {
            out.push(format!(
                "seam: {rel}:{} sets inner_html (bundle text is text in the viewer)",
                i + 1
            ));
        }
    }
    out
}

/// Whether `path` (relative to the repository) is checked for the source rules.
pub(crate) fn checked(path: &Path) -> bool {
    let s = path.to_string_lossy();
    (s.starts_with("shared/src/") || s.starts_with("web/src/"))
        && !s.ends_with("tests.rs")
        && !s.contains("/tests/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crate_that_crosses_a_seam_is_named() {
        let web = "[dependencies]\nstallscope-bundle.workspace = true\nstallscope-core = \"1\"\n";
        let f = manifest_findings("web", web);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("depends on stallscope-core"), "{f:?}");
        assert!(manifest_findings("web", "[dependencies]\nstallscope-bundle = \"1\"\n").is_empty());
        let shared = "[dependencies]\nserde = \"1\"\nstallscope-loader = \"1\"\n";
        assert!(manifest_findings("shared", shared)[0].contains("no crate of ours"));
        let runner = "[dependencies]\ntch = \"0.20\"\n";
        assert!(manifest_findings("runner", runner)[0].contains("links tch"));
        assert!(manifest_findings("runner/torch", runner).is_empty());
    }

    #[test]
    fn the_format_crate_touches_no_file_and_the_viewer_sets_no_html() {
        let f = source_findings(
            "shared/src/read.rs",
            "use std::fs::File;\n// std::fs in a comment\n",
        );
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("shared/src/read.rs:1 names std::fs"), "{f:?}");
        let tested = "fn a() {}\n#[cfg(test)]\nmod tests { use std::fs; }\n";
        assert!(source_findings("shared/src/x.rs", tested).is_empty());
        let web = "view! { <div inner_html=text/> }";
        assert!(source_findings("web/src/app.rs", web)[0].contains("inner_html"));
        assert!(source_findings("runner/src/x.rs", "use std::fs;").is_empty());
    }
}
