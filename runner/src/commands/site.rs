//! `stallscope site BUNDLE... --out DIR`: a self-contained static site — the
//! viewer embedded in this binary, the bundles, and an `index.json` the
//! viewer opens at start. Relative paths only, so it works under any sub-path
//! of a static host; no server code.
//!
//! The viewer files are embedded at build time from `target/web-dist` (or
//! `STALLSCOPE_WEB_DIST`), which `cargo xtask` fills before building the
//! runner; see `runner/build_web_dist.rs`. A binary built without them says so.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

#[derive(Debug, clap::Args)]
pub struct SiteArgs {
    /// Bundle files (JSON); each is validated first, and nothing is written if one is bad.
    #[arg(required = true)]
    pub bundles: Vec<PathBuf>,
    /// The folder to write (new, empty, or a previous site).
    #[arg(long)]
    pub out: PathBuf,
}

include!(concat!(env!("OUT_DIR"), "/web_dist.rs"));

/// The files every viewer build has; the site is refused without them.
const REQUIRED_VIEWER_FILES: [&str; 3] =
    ["index.html", "stallscope_web.js", "stallscope_web_bg.wasm"];

/// The name of the site's index, read by the viewer at start.
pub const SITE_INDEX: &str = "index.json";

/// Why a site was not written.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error(
        "this stallscope binary was built without the viewer (no files in {searched} at build time). Build it with `cargo xtask build` (which builds the viewer into target/web-dist first), or build the viewer and set STALLSCOPE_WEB_DIST to its folder before `cargo build -p stallscope`."
    )]
    NoViewer { searched: String },
    #[error("{file}: cannot read it: {error}")]
    Read {
        file: PathBuf,
        error: std::io::Error,
    },
    #[error("{file}: not a valid bundle: {error}")]
    Invalid {
        file: PathBuf,
        error: stallscope_bundle::ReadError,
    },
    #[error("{file}: a sidecar of {bundle} that does not belong with it: {error}")]
    Sidecar {
        file: PathBuf,
        bundle: PathBuf,
        error: stallscope_bundle::sidecar::SidecarError,
    },
    #[error(
        "{dir}: the output folder is not empty and is not a stallscope site (no {SITE_INDEX}); choose an empty or new folder"
    )]
    OutNotEmpty { dir: PathBuf },
    #[error("{path}: cannot write it: {error}")]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// One bundle as listed in the site's `index.json`.
#[derive(Debug, Clone, Serialize)]
pub struct SiteEntry {
    /// Path relative to the site root.
    pub file: String,
    pub id: String,
    pub title: String,
    /// `measured` or `published`.
    pub provenance: &'static str,
    pub bytes: usize,
}

/// The site's `index.json`.
#[derive(Debug, Clone, Serialize)]
pub struct SiteIndex {
    /// Always `stallscope-site`.
    pub kind: &'static str,
    pub version: u32,
    pub bundles: Vec<SiteEntry>,
}

/// `stallscope site`.
pub fn run(args: &SiteArgs) -> anyhow::Result<ExitCode> {
    let index = write_site(&args.bundles, &args.out)?;
    crate::outln!(
        "Wrote a site with {} bundle{} to {}",
        index.bundles.len(),
        if index.bundles.len() == 1 { "" } else { "s" },
        args.out.display()
    );
    for entry in &index.bundles {
        crate::outln!("  {}  {} ({})", entry.file, entry.title, entry.provenance);
    }
    crate::outln!("Serve it with: stallscope serve {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

/// Validate every bundle, then write the site. Nothing is written when a
/// bundle is bad or the viewer is missing.
pub fn write_site(bundles: &[PathBuf], out: &Path) -> Result<SiteIndex, SiteError> {
    if !REQUIRED_VIEWER_FILES
        .iter()
        .all(|name| WEB_DIST.iter().any(|(file, _)| file == name))
    {
        return Err(SiteError::NoViewer {
            searched: WEB_DIST_SOURCE.to_string(),
        });
    }
    let mut entries = Vec::new();
    let mut contents = Vec::new();
    for path in bundles {
        let bytes = std::fs::read(path).map_err(|error| SiteError::Read {
            file: path.clone(),
            error,
        })?;
        let bundle =
            stallscope_bundle::read_bundle(&bytes).map_err(|error| SiteError::Invalid {
                file: path.clone(),
                error,
            })?;
        let file = format!("bundles/{:02}-{}.json", entries.len() + 1, slug(path));
        entries.push(SiteEntry {
            file: file.clone(),
            id: bundle.id.clone(),
            title: bundle.title.clone(),
            provenance: if bundle.is_measured() {
                "measured"
            } else {
                "published"
            },
            bytes: bytes.len(),
        });
        contents.push((file, bytes));
        // A merged bundle's per-rank step series (format 1.3) travel beside
        // it: the viewer fetches them next to the bundle.
        // Each is checked against the bundle's record (size, checksum,
        // bundle id, stage) and decoded, as the viewer will, before it is copied.
        for record in sidecars(&bundle) {
            let from = path.parent().unwrap_or(Path::new(".")).join(&record.file);
            let data = std::fs::read(&from).map_err(|error| SiteError::Read {
                file: from.clone(),
                error,
            })?;
            stallscope_bundle::sidecar::decode_for(&data, record, &bundle.id).map_err(|error| {
                SiteError::Sidecar {
                    file: from.clone(),
                    bundle: path.clone(),
                    error,
                }
            })?;
            contents.push((format!("bundles/{}", record.file), data));
        }
    }
    prepare_out_dir(out)?;
    for (name, data) in WEB_DIST {
        write(&out.join(name), data)?;
    }
    for (file, bytes) in &contents {
        write(&out.join(file), bytes)?;
    }
    let index = SiteIndex {
        kind: "stallscope-site",
        version: 1,
        bundles: entries,
    };
    let json = serde_json::to_vec_pretty(&index).expect("the index always serializes");
    write(&out.join(SITE_INDEX), &json)?;
    Ok(index)
}

/// The sidecar files a merged bundle names (plain file names, checked by
/// validation), with their records.
fn sidecars(bundle: &stallscope_bundle::Bundle) -> Vec<&stallscope_bundle::RankSidecar> {
    bundle
        .experiments
        .iter()
        .flat_map(|e| &e.configurations)
        .filter_map(|c| c.ranks.as_ref())
        .flat_map(|r| r.sidecars.iter())
        .collect()
}

/// Create `out`, or clear the bundles of a previous site there; refuse a
/// folder holding anything else.
fn prepare_out_dir(out: &Path) -> Result<(), SiteError> {
    let write_err = |error| SiteError::Write {
        path: out.to_path_buf(),
        error,
    };
    if out.exists() {
        let not_empty = std::fs::read_dir(out).map_err(write_err)?.next().is_some();
        if not_empty && !out.join(SITE_INDEX).is_file() {
            return Err(SiteError::OutNotEmpty {
                dir: out.to_path_buf(),
            });
        }
        let old = out.join("bundles");
        if old.is_dir() {
            std::fs::remove_dir_all(&old).map_err(|error| SiteError::Write { path: old, error })?;
        }
    }
    std::fs::create_dir_all(out.join("bundles")).map_err(write_err)
}

fn write(path: &Path, data: &[u8]) -> Result<(), SiteError> {
    std::fs::write(path, data).map_err(|error| SiteError::Write {
        path: path.to_path_buf(),
        error,
    })
}

/// A file-name-safe version of the input's stem.
fn slug(path: &Path) -> String {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("bundle");
    let slug: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(60)
        .collect();
    if slug.is_empty() {
        "bundle".into()
    } else {
        slug
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_safe_file_names() {
        assert_eq!(
            slug(Path::new("/a/fashion mnist<1>.json")),
            "fashion-mnist-1-"
        );
        assert_eq!(slug(Path::new("x.json")), "x");
    }

    #[test]
    fn a_bad_bundle_writes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{\"schema_version\": ").unwrap();
        let out = dir.join("site");
        let err = write_site(std::slice::from_ref(&bad), &out).unwrap_err();
        let text = err.to_string();
        if WEB_DIST.is_empty() {
            assert!(text.contains("built without the viewer"), "{text}");
        } else {
            assert!(
                text.contains("bad.json") && text.contains("line 1"),
                "{text}"
            );
        }
        assert!(!out.exists(), "nothing may be written for a bad bundle");
    }
}
