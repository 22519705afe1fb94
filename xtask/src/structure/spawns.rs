//! Who starts processes: in product code (a crate's `src/`, its test
//! modules and `tests.rs` files left out) only `stallscope-python` creates a
//! `std::process::Command`, so every Python process has one owner. The few
//! other programs the product starts are listed here with why.
use std::path::Path;

/// Files outside `runner/python` that may start a process, and why.
pub(crate) const ALLOWED: &[(&str, &str)] = &[
    (
        "runner/loader/src/process.rs",
        "the native loader's own worker binary (Rust, not Python)",
    ),
    (
        "runner/core/build.rs",
        "git, for the runner's commit at build time",
    ),
];

/// Where `text` (the file `rel`, relative to the repository) creates a
/// process: the 1-based lines of `Command::new` outside test code.
pub(crate) fn spawns(rel: &str, text: &str) -> Vec<usize> {
    if rel.starts_with("runner/python/") || ALLOWED.iter().any(|(f, _)| *f == rel) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break; // the test module closes the file, by the house's layout
        }
        if line.contains("Command::new(") && !line.trim_start().starts_with("//") {
            out.push(i + 1);
        }
    }
    out
}

/// Whether `path` is product code of a crate: under a `src/`, not a `tests.rs`.
pub(crate) fn is_product(path: &Path) -> bool {
    let s = path.to_string_lossy();
    s.contains("/src/")
        && !s.ends_with("/tests.rs")
        && !s.contains("/tests/")
        && !s.starts_with("xtask/")
        && !s.starts_with("tests/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_python_crate_starts_processes() {
        let code = "fn f() {\n    let c = Command::new(python);\n}\n";
        assert_eq!(spawns("runner/peers/src/spawn.rs", code), [2]);
        assert!(spawns("runner/python/src/process.rs", code).is_empty());
        assert!(spawns("runner/loader/src/process.rs", code).is_empty());
        let tested = "fn f() {}\n#[cfg(test)]\nmod tests {\n    Command::new(x);\n}\n";
        assert!(spawns("runner/src/x.rs", tested).is_empty());
        assert!(is_product(Path::new("runner/src/commands/job.rs")));
        assert!(!is_product(Path::new("runner/tests/job.rs")));
        assert!(!is_product(Path::new("xtask/src/cmd.rs")));
    }
}
