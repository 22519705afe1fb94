//! The one helper for located suite errors: every problem names the file,
//! the line and column, the key and what was expected
//! (`file:line:col: key: message`).

use toml::Spanned;

/// A suite problem, located.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}:{line}:{column}: {key}: {message}")]
pub struct SuiteError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// The key at fault (`experiment[2].batch_sizes`), or `(document)`.
    pub key: String,
    pub message: String,
}

/// Where a byte offset falls: (line, column), both 1-based.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// A suite's text and file name: builds located errors and checks spanned
/// values against their ranges.
pub(crate) struct Located<'a> {
    pub file: &'a str,
    pub text: &'a str,
}

impl Located<'_> {
    pub(crate) fn err(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> SuiteError {
        let (line, column) = line_col(self.text, span.start);
        SuiteError {
            file: self.file.into(),
            line,
            column,
            key: key.into(),
            message: message.into(),
        }
    }

    pub(crate) fn positive(
        &self,
        v: &Spanned<i64>,
        key: &str,
        max: i64,
    ) -> Result<i64, SuiteError> {
        let x = *v.get_ref();
        if x < 1 || x > max {
            return Err(self.err(
                v.span(),
                key,
                format!("{x} is out of range; expected an integer from 1 to {max}"),
            ));
        }
        Ok(x)
    }

    pub(crate) fn positive_list(
        &self,
        v: &Spanned<Vec<i64>>,
        key: &str,
        max: i64,
    ) -> Result<Vec<i64>, SuiteError> {
        if v.get_ref().is_empty() {
            return Err(self.err(v.span(), key, "empty list; expected at least one value"));
        }
        for &x in v.get_ref() {
            if x < 1 || x > max {
                return Err(self.err(
                    v.span(),
                    key,
                    format!("{x} is out of range; expected integers from 1 to {max}"),
                ));
            }
        }
        Ok(v.get_ref().clone())
    }

    pub(crate) fn int(
        &self,
        v: &Option<Spanned<i64>>,
        key: &str,
        default: i64,
        min: i64,
        max: i64,
    ) -> Result<i64, SuiteError> {
        let Some(v) = v else { return Ok(default) };
        let x = *v.get_ref();
        if x < min || x > max {
            return Err(self.err(
                v.span(),
                key,
                format!("{x} is out of range; expected an integer from {min} to {max}"),
            ));
        }
        Ok(x)
    }

    pub(crate) fn ints(
        &self,
        v: &Option<Spanned<Vec<i64>>>,
        key: &str,
        default: &[i64],
        min: i64,
        max: i64,
    ) -> Result<Vec<usize>, SuiteError> {
        let Some(v) = v else {
            return Ok(default.iter().map(|&x| x as usize).collect());
        };
        if v.get_ref().is_empty() {
            return Err(self.err(v.span(), key, "empty list; expected at least one value"));
        }
        v.get_ref()
            .iter()
            .map(|&x| {
                if x < min || x > max {
                    Err(self.err(
                        v.span(),
                        key,
                        format!("{x} is out of range; expected integers from {min} to {max}"),
                    ))
                } else {
                    Ok(x as usize)
                }
            })
            .collect()
    }

    pub(crate) fn bools(
        &self,
        v: &Option<Spanned<Vec<bool>>>,
        key: &str,
        default: bool,
    ) -> Result<Vec<bool>, SuiteError> {
        match v {
            None => Ok(vec![default]),
            Some(v) if v.get_ref().is_empty() => {
                Err(self.err(v.span(), key, "empty list; expected at least one value"))
            }
            Some(v) => Ok(v.get_ref().clone()),
        }
    }
}

impl Located<'_> {
    /// A list of names, each one of `table` (no repeats), else `default`.
    pub(crate) fn choices<T: Copy>(
        &self,
        v: &Option<Spanned<Vec<String>>>,
        key: &str,
        default: &[T],
        table: &[(&str, T)],
    ) -> Result<Vec<T>, SuiteError> {
        let Some(v) = v else {
            return Ok(default.to_vec());
        };
        if v.get_ref().is_empty() {
            return Err(self.err(v.span(), key, "empty list; expected at least one value"));
        }
        let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
        let mut seen: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        for name in v.get_ref() {
            let Some((n, value)) = table.iter().find(|(n, _)| n == name) else {
                return Err(self.err(
                    v.span(),
                    key,
                    format!("{name:?}; expected {}", names.join(", ")),
                ));
            };
            if seen.contains(n) {
                return Err(self.err(
                    v.span(),
                    key,
                    format!("{name:?} twice; expected each value once"),
                ));
            }
            seen.push(n);
            out.push(*value);
        }
        Ok(out)
    }
}

/// The key written at the start of the line holding `offset` (for parse
/// errors, whose span points into that line), with its table.
pub(crate) fn key_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let table = text[..line_start]
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('['))
        .map(|l| l.trim().trim_matches(|c| c == '[' || c == ']').to_string());
    let key = line.split('=').next().unwrap_or("").trim();
    match (table, key.is_empty() || key.starts_with('[')) {
        (_, true) => "(document)".into(),
        (Some(t), false) => format!("{t}.{key}"),
        (None, false) => key.into(),
    }
}
