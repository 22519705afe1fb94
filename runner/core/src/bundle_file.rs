//! Bundles on disk: reading one with a message that names the file, and
//! writing one atomically (temporary file in the same folder, then rename) so
//! an interrupted write never leaves a truncated bundle.

use std::io::Write;
use std::path::{Path, PathBuf};

use stallscope_bundle::{Bundle, MAX_BUNDLE_BYTES, ReadError, read_bundle};

/// Why a bundle file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BundleFileError {
    #[error("{path}: cannot read the file: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {error}")]
    Bundle { path: PathBuf, error: ReadError },
}

impl BundleFileError {
    /// One paragraph per problem, each starting with the file name.
    pub fn paragraphs(&self) -> Vec<String> {
        match self {
            BundleFileError::Bundle { path, error } => error
                .problems()
                .into_iter()
                .map(|p| format!("{}: {p}", path.display()))
                .collect(),
            other => vec![other.to_string()],
        }
    }
}

/// Read and validate a bundle file.
pub fn read_bundle_file(path: &Path) -> Result<Bundle, BundleFileError> {
    let io = |source| BundleFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    // Refuse a huge file before reading it into memory.
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_BUNDLE_BYTES as u64 {
        return Err(BundleFileError::Bundle {
            path: path.to_path_buf(),
            error: ReadError::TooLarge {
                bytes: len as usize,
                limit: MAX_BUNDLE_BYTES,
            },
        });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    read_bundle(&bytes).map_err(|error| BundleFileError::Bundle {
        path: path.to_path_buf(),
        error,
    })
}

/// Write a bundle atomically: `<path>.tmp-<pid>` then rename over `path`.
/// A rank's bundle (`environment.rank` set) is written without indentation:
/// a job of thousands of ranks writes thousands of them and `stallscope
/// merge` reads them all, a third of the bytes and about a quarter less
/// parsing; a one-process bundle stays indented for people to read. Every
/// reader takes both.
pub fn write_atomic(path: &Path, bundle: &Bundle) -> std::io::Result<()> {
    if bundle.environment.rank.is_some() {
        return write_atomic_compact(path, bundle);
    }
    write_atomic_bytes(path, bundle.to_json_pretty().as_bytes())
}

/// [`write_atomic`] without indentation: a merged bundle of many ranks is
/// about a third of its indented size, which keeps it within the viewer's
/// read limit.
pub fn write_atomic_compact(path: &Path, bundle: &Bundle) -> std::io::Result<()> {
    let json = serde_json::to_vec(bundle).map_err(std::io::Error::other)?;
    write_atomic_bytes(path, &json)
}

fn write_atomic_bytes(path: &Path, json: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let file_name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("bundle.json");
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(json)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_bundle::*;

    fn bundle(rank: Option<RankLayout>) -> Bundle {
        Bundle {
            schema_version: SchemaVersion::CURRENT,
            id: "b".into(),
            title: "t".into(),
            created_at: "2026-12-01T00:00:00Z".into(),
            provenance: Provenance::Measured,
            environment: Environment {
                rank,
                ..Environment::default()
            },
            experiments: Vec::new(),
            status: RunStatus {
                state: RunState::Complete,
                message: None,
            },
            ranks: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A rank's bundle is one line, a one-process bundle indented; both
    /// decode to what was written.
    #[test]
    fn a_ranks_bundle_is_compact_and_a_lone_one_indented() {
        let dir = tempfile::tempdir().unwrap();
        let ranked = bundle(Some(RankLayout {
            rank: 1,
            world_size: 2,
            ..RankLayout::default()
        }));
        for (name, b, indented) in [
            ("rank.json", ranked, false),
            ("lone.json", bundle(None), true),
        ] {
            let path = dir.path().join(name);
            write_atomic(&path, &b).unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                text.contains("\n  \"schema_version\""),
                indented,
                "{name}: {text}"
            );
            assert_eq!(text.lines().count() == 1, !indented, "{name}: {text}");
            assert_eq!(parse_bundle(text.as_bytes()).unwrap(), b, "{name}");
        }
    }
}
