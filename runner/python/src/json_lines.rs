//! The one reader of JSON-lines records, whichever way they come: the peer
//! harness's standard output (a line at a time) or the job's record files
//! (`proc-<pid>.jsonl`, a file at a time). A line that is not JSON is named
//! with its source and line number.

use std::path::Path;

use serde::de::DeserializeOwned;

/// A line that could not be read: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonLineError {
    /// The file, or what the lines come from ("the pytorch harness").
    pub source: String,
    /// 1-based line number (0: the file could not be read).
    pub line: usize,
    /// Why: the JSON parser's words, or the file's error.
    pub cause: String,
    /// The start of the line (empty when the file could not be read).
    pub excerpt: String,
}

impl std::fmt::Display for JsonLineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.source, self.cause)
        } else {
            write!(
                f,
                "{}:{}: not a JSON record ({}): {:?}",
                self.source, self.line, self.cause, self.excerpt
            )
        }
    }
}

impl std::error::Error for JsonLineError {}

/// Line `n` of `source` as a `T` (a typed protocol line, or a
/// `serde_json::Value`); the error quotes the start of the line.
pub fn parse_line<T: DeserializeOwned>(
    source: &str,
    n: usize,
    text: &str,
) -> Result<T, JsonLineError> {
    serde_json::from_str(text).map_err(|e| JsonLineError {
        source: source.to_string(),
        line: n,
        cause: e.to_string(),
        excerpt: text.chars().take(120).collect(),
    })
}

/// Every non-empty line of the file at `path`, in order.
pub fn read_file<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, JsonLineError> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| JsonLineError {
        source: source.clone(),
        line: 0,
        cause: e.to_string(),
        excerpt: String::new(),
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_line(&source, i + 1, l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_bad_line_names_its_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("proc-1.jsonl");
        std::fs::write(&p, "{\"type\":\"hello\"}\n\n{\"type\": oops}\n").unwrap();
        let e = read_file::<Value>(&p).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(
            e.to_string()
                .starts_with(&format!("{}:3: not a JSON record", p.display())),
            "{e}"
        );
        std::fs::write(&p, "{\"type\":\"hello\"}\n\n{\"type\":\"done\"}\n").unwrap();
        let ok = read_file::<Value>(&p).unwrap();
        assert_eq!(ok.len(), 2, "the empty line is skipped");
        let missing = read_file::<Value>(&dir.path().join("none.jsonl")).unwrap_err();
        assert_eq!(missing.line, 0);
    }
}
