//! Reading a bundle from bytes: size limit, JSON syntax with line and column,
//! the version check, and every type problem with its JSON path — then the
//! semantic validation of [`crate::validate`].
//!
//! Type problems are collected level by level (bundle, each experiment, each
//! configuration, each run), so one broken run does not hide a problem in
//! another.
//!
//! The open enums of the format keep a value this build does not know
//! ([`crate::format::open`]); such a value is accepted only from a bundle of
//! a newer minor than [`FORMAT_MINOR`] (same major). In a bundle of this
//! build's minor or older it is a type problem at its path, as serde reports
//! an unknown variant.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::format::{
    Bundle, Configuration, Experiment, FORMAT_MAJOR, FORMAT_MINOR, Failure, OpenEnum, Run,
    SchemaVersion,
};
use crate::validate::{Problem, validate};

/// The largest bundle accepted (bytes). Large enough for about a million
/// per-step records; a browser tab can hold it comfortably.
pub const MAX_BUNDLE_BYTES: usize = 40 * 1024 * 1024;

/// Why a bundle could not be read. `Display` gives one paragraph for people.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReadError {
    #[error(
        "the file is {bytes} bytes ({mib:.1} MiB); a bundle may be at most {limit} bytes ({limit_mib:.0} MiB) so that a browser can load it. Per-step arrays are the usual cause: keep them for fewer runs.",
        mib = *bytes as f64 / 1048576.0,
        limit_mib = *limit as f64 / 1048576.0
    )]
    TooLarge { bytes: usize, limit: usize },
    #[error("the file is empty; expected a JSON object (a stallscope bundle).")]
    Empty,
    #[error(
        "not valid JSON at line {line}, column {column}: {message}. Expected a stallscope bundle (a JSON object)."
    )]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("at {path}: {message}; expected {expected}.")]
    NotABundle {
        path: String,
        message: String,
        expected: String,
    },
    #[error(
        "the bundle is in format {found}, newer than this build of stallscope reads (format {reads}.x). Upgrade stallscope to read it."
    )]
    TooNew { found: SchemaVersion, reads: u32 },
    #[error(
        "the bundle is in format {found}, older than this build of stallscope reads (format {reads}.x)."
    )]
    TooOld { found: SchemaVersion, reads: u32 },
    #[error("{} problem{}: {}", .0.len(), if .0.len() == 1 { "" } else { "s" }, join_problems(.0))]
    Invalid(Vec<Problem>),
}

fn join_problems(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

impl ReadError {
    /// Every problem as its own paragraph (for `validate`).
    pub fn problems(&self) -> Vec<String> {
        match self {
            ReadError::Invalid(problems) => problems.iter().map(|p| p.to_string()).collect(),
            other => vec![other.to_string()],
        }
    }
}

/// Decode a bundle: every type problem with its path, but no semantic checks.
///
/// Most bundles are well formed, so they are decoded straight into the
/// types first, with the open-enum checks after; only when that fails is
/// the bundle decoded again piece by piece through a `Value`, which finds
/// every problem with its path. Both give the same bundle where both
/// succeed; a fast decode that fails only costs the located one.
pub fn parse_bundle(bytes: &[u8]) -> Result<Bundle, ReadError> {
    size_and_emptiness(bytes)?;
    if let Ok(bundle) = serde_json::from_slice::<Bundle>(bytes)
        && let Some(result) = typed_checks(bundle)
    {
        return result;
    }
    located(bytes)
}

fn size_and_emptiness(bytes: &[u8]) -> Result<(), ReadError> {
    if bytes.len() > MAX_BUNDLE_BYTES {
        return Err(ReadError::TooLarge {
            bytes: bytes.len(),
            limit: MAX_BUNDLE_BYTES,
        });
    }
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ReadError::Empty);
    }
    Ok(())
}

/// The checks of the located decode on a bundle decoded straight into the
/// types: the version, then the open enums. `None` where the located decode
/// should speak instead (a version that is not one this build reads).
fn typed_checks(bundle: Bundle) -> Option<Result<Bundle, ReadError>> {
    let v = bundle.schema_version;
    if v.major != FORMAT_MAJOR {
        return None;
    }
    let unknown = Unknowns {
        accepted: v.minor > FORMAT_MINOR,
        version: v,
    };
    let mut problems = Vec::new();
    if !unknown.accepted {
        for (i, e) in bundle.experiments.iter().enumerate() {
            let path = format!("$.experiments[{i}]");
            unknown.check(&e.kind, format!("{path}.kind"), &mut problems);
            for (j, c) in e.configurations.iter().enumerate() {
                let cpath = format!("{path}.configurations[{j}]");
                if let Some(engine) = &c.engine {
                    unknown.check(engine, format!("{cpath}.engine"), &mut problems);
                }
                if let Some(failure) = &c.failure {
                    unknown.check_failure(failure, &format!("{cpath}.failure"), &mut problems);
                }
                for (k, r) in c.runs.iter().enumerate() {
                    let rpath = format!("{cpath}.runs[{k}].timing_mode");
                    unknown.check(&r.timing_mode, rpath, &mut problems);
                }
            }
        }
    }
    Some(if problems.is_empty() {
        Ok(bundle)
    } else {
        Err(ReadError::Invalid(problems))
    })
}

/// [`parse_bundle`] piece by piece through a `Value` alone: every problem
/// found with its JSON path. The same result as [`parse_bundle`], slower;
/// public so tests can hold the two to that.
pub fn parse_bundle_located(bytes: &[u8]) -> Result<Bundle, ReadError> {
    size_and_emptiness(bytes)?;
    located(bytes)
}

fn located(bytes: &[u8]) -> Result<Bundle, ReadError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| ReadError::Syntax {
        line: e.line(),
        column: e.column(),
        message: syntax_message(&e),
    })?;
    let Value::Object(mut top) = value else {
        return Err(ReadError::NotABundle {
            path: "$".into(),
            message: format!("found {}", describe(&value)),
            expected: "a JSON object with `schema_version`, `provenance`, `experiments`, ..."
                .into(),
        });
    };
    let version = check_version(top.get("schema_version"))?;
    let unknown = Unknowns {
        accepted: version.minor > FORMAT_MINOR,
        version,
    };

    let mut problems = Vec::new();
    let experiments = take_array(&mut top, "experiments", "$", &mut problems);
    let shell: Option<Bundle> = decode(Value::Object(top), "$", &mut problems);
    let mut decoded_experiments = Vec::new();
    for (i, exp) in experiments.into_iter().enumerate() {
        let path = format!("$.experiments[{i}]");
        if let Some(e) = decode_experiment(exp, &path, unknown, &mut problems) {
            decoded_experiments.push(e);
        }
    }
    match shell {
        Some(mut bundle) if problems.is_empty() => {
            bundle.experiments = decoded_experiments;
            Ok(bundle)
        }
        _ => Err(ReadError::Invalid(problems)),
    }
}

/// Decode and validate: the way every consumer reads a bundle.
pub fn read_bundle(bytes: &[u8]) -> Result<Bundle, ReadError> {
    let bundle = parse_bundle(bytes)?;
    let problems = validate(&bundle);
    if problems.is_empty() {
        Ok(bundle)
    } else {
        Err(ReadError::Invalid(problems))
    }
}

fn check_version(v: Option<&Value>) -> Result<SchemaVersion, ReadError> {
    let expected = "an object {\"major\": 1, \"minor\": N}".to_string();
    let Some(v) = v else {
        return Err(ReadError::NotABundle {
            path: "$.schema_version".into(),
            message: "missing".into(),
            expected,
        });
    };
    let version: SchemaVersion =
        serde_json::from_value(v.clone()).map_err(|e| ReadError::NotABundle {
            path: "$.schema_version".into(),
            message: format!("{} ({})", describe(v), e),
            expected: expected.clone(),
        })?;
    if version.major > FORMAT_MAJOR {
        return Err(ReadError::TooNew {
            found: version,
            reads: FORMAT_MAJOR,
        });
    }
    if version.major < FORMAT_MAJOR {
        return Err(ReadError::TooOld {
            found: version,
            reads: FORMAT_MAJOR,
        });
    }
    Ok(version)
}

/// Whether values of the open enums this build does not know are accepted.
#[derive(Clone, Copy)]
struct Unknowns {
    accepted: bool,
    version: SchemaVersion,
}

impl Unknowns {
    /// Refuse `value` at `path` if it is unknown and the bundle is not newer.
    fn check(self, value: &impl OpenEnum, path: String, problems: &mut Vec<Problem>) {
        if self.accepted {
            return;
        }
        if let Some(refusal) = value.refusal() {
            let (message, expected) = humanize(&refusal);
            problems.push(Problem::new(
                path,
                message,
                format!(
                    "{expected} (format {} has no other; a value this build does not know is read only from a bundle newer than format {})",
                    self.version,
                    SchemaVersion::CURRENT
                ),
            ));
        }
    }
}

impl Unknowns {
    /// A failure's kind, and the open enums of the kinds that hold one.
    fn check_failure(self, f: &Failure, path: &str, problems: &mut Vec<Problem>) {
        self.check(f, format!("{path}.kind"), problems);
        match f {
            Failure::WouldNotFit { resource, .. } => {
                self.check(resource, format!("{path}.resource"), problems)
            }
            Failure::Crashed { cause, .. } => self.check(cause, format!("{path}.cause"), problems),
            _ => {}
        }
    }
}

fn decode_experiment(
    v: Value,
    path: &str,
    unknown: Unknowns,
    problems: &mut Vec<Problem>,
) -> Option<Experiment> {
    let Value::Object(mut obj) = v else {
        problems.push(Problem::new(
            path,
            format!("found {}", describe(&v)),
            "an experiment object",
        ));
        return None;
    };
    let configs = take_array(&mut obj, "configurations", path, problems);
    let mut exp: Experiment = decode(Value::Object(obj), path, problems)?;
    unknown.check(&exp.kind, format!("{path}.kind"), problems);
    let mut decoded = Vec::new();
    for (j, c) in configs.into_iter().enumerate() {
        let cpath = format!("{path}.configurations[{j}]");
        let Value::Object(mut cobj) = c else {
            problems.push(Problem::new(
                &cpath,
                format!("found {}", describe(&c)),
                "a configuration object",
            ));
            continue;
        };
        let runs = take_array(&mut cobj, "runs", &cpath, problems);
        let Some(mut config): Option<Configuration> = decode(Value::Object(cobj), &cpath, problems)
        else {
            continue;
        };
        if let Some(engine) = &config.engine {
            unknown.check(engine, format!("{cpath}.engine"), problems);
        }
        if let Some(failure) = &config.failure {
            unknown.check_failure(failure, &format!("{cpath}.failure"), problems);
        }
        config.runs = runs
            .into_iter()
            .enumerate()
            .filter_map(|(k, r)| {
                let rpath = format!("{cpath}.runs[{k}]");
                let run = decode::<Run>(r, &rpath, problems)?;
                unknown.check(&run.timing_mode, format!("{rpath}.timing_mode"), problems);
                Some(run)
            })
            .collect();
        decoded.push(config);
    }
    exp.configurations = decoded;
    Some(exp)
}

/// Remove `key` (an array) from `obj`, leaving an empty array in its place.
fn take_array(
    obj: &mut serde_json::Map<String, Value>,
    key: &str,
    path: &str,
    problems: &mut Vec<Problem>,
) -> Vec<Value> {
    match obj.insert(key.to_string(), Value::Array(Vec::new())) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            problems.push(Problem::new(
                format!("{path}.{key}"),
                format!("found {}", describe(&other)),
                "an array",
            ));
            Vec::new()
        }
    }
}

fn decode<T: DeserializeOwned>(v: Value, path: &str, problems: &mut Vec<Problem>) -> Option<T> {
    match serde_path_to_error::deserialize::<_, T>(&v) {
        Ok(t) => Some(t),
        Err(err) => {
            let inner = err.path().to_string();
            let full = if inner == "." || inner.is_empty() {
                path.to_string()
            } else if inner.starts_with('[') {
                format!("{path}{inner}")
            } else {
                format!("{path}.{inner}")
            };
            let (message, expected) = humanize(&err.into_inner().to_string());
            problems.push(Problem::new(full, message, expected));
            None
        }
    }
}

/// Turn serde's "invalid type: string \"NaN\", expected f64" into a finding
/// and an expectation people read easily.
fn humanize(serde_msg: &str) -> (String, String) {
    let (found, expected) = match serde_msg.split_once(", expected ") {
        Some((f, e)) => (f.to_string(), e.to_string()),
        None => (
            serde_msg.to_string(),
            "a value of the bundle format".to_string(),
        ),
    };
    let found = found
        .trim_start_matches("invalid type: ")
        .trim_start_matches("invalid value: ")
        .to_string();
    let mut expected = match expected.as_str() {
        "f64" | "f32" => "a finite number".to_string(),
        "u64" | "u32" | "u16" | "u8" | "usize" => "a non-negative integer".to_string(),
        "i64" | "i32" => "an integer".to_string(),
        "a string" => "a string".to_string(),
        "a boolean" => "true or false".to_string(),
        other => other.replace('`', "\""),
    };
    let lower = found.to_ascii_lowercase();
    if lower.contains("\"nan\"") || lower.contains("\"infinity\"") || lower.contains("\"inf\"") {
        expected.push_str(
            " (JSON has no NaN or Infinity, and a number written as a string is not a number)",
        );
    }
    let found = if found.starts_with("integer `") || found.starts_with("floating point `") {
        format!("found {}", found.replace('`', ""))
    } else if let Some(field) = found.strip_prefix("missing field ") {
        format!("the field {} is missing", field.replace('`', "\""))
    } else if found.starts_with("unknown variant") {
        found.replace('`', "\"")
    } else {
        format!("found {}", found.replace('`', "\""))
    };
    (found, expected)
}

fn syntax_message(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    // serde_json appends " at line L column C"; we report those separately.
    let msg = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    };
    if msg.contains("recursion limit") {
        "nesting deeper than 128 levels (a bundle nests fewer than 10)".to_string()
    } else if msg.contains("EOF while parsing") {
        "the file ends in the middle of a value (truncated?)".to_string()
    } else {
        msg
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.len() > 40 => format!("a string of {} characters", s.len()),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(a) => format!("an array of {} items", a.len()),
        Value::Object(_) => "an object".into(),
    }
}
