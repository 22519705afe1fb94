//! The Python packages embedded in the runner (every `python/stallscope_*`:
//! the peers harness, the job instrumentation, what they share), written
//! once into the cache (keyed by a hash of their text) so the runner works
//! from any folder; `$STALLSCOPE_HARNESS_DIR` points at a checkout's
//! `python/` instead.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;

include!(concat!(env!("OUT_DIR"), "/harness_files.rs"));

/// The folder to put on `PYTHONPATH` (it holds the `stallscope_*` packages).
pub fn packages_dir() -> Result<PathBuf, String> {
    if let Some(d) = std::env::var_os("STALLSCOPE_HARNESS_DIR").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    if FILES.is_empty() {
        return Err(
            "this runner was built without its Python packages (python/stallscope_* was missing)"
                .into(),
        );
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    FILES.hash(&mut h);
    let root = crate::find::cache_root()
        .unwrap_or_else(std::env::temp_dir)
        .join("harness")
        .join(format!("{:016x}", h.finish()));
    if FILES
        .iter()
        .all(|(name, text)| std::fs::read_to_string(root.join(name)).is_ok_and(|t| t == *text))
    {
        return Ok(root);
    }
    let fail = |e: std::io::Error| {
        format!(
            "cannot write the Python packages into {}: {e}",
            root.display()
        )
    };
    // Written into a temporary folder and renamed, so a half-written
    // package is never run.
    let tmp = root.with_extension(format!("tmp{}", std::process::id()));
    for (name, text) in FILES {
        let path = tmp.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(fail)?;
        }
        std::fs::write(path, text).map_err(fail)?;
    }
    let _ = std::fs::remove_dir_all(&root);
    if std::fs::rename(&tmp, &root).is_err() {
        // Another runner won the race; its copy has the same text.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(root)
}
