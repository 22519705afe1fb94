//! Why a process ended without completing its window, from its `end` or
//! `error` record (docs/job-protocol.md): one sentence (the steps done of
//! those asked, the exception and the line of the user's own code it came
//! from, whether it was waiting for data), and for an exception the user's
//! script raised, a `Failure::Script` with the whole traceback kept.

use serde_json::Value;
use stallscope_bundle::Failure;

use crate::records::ProcFile;

/// How a process ended early.
pub struct Ended {
    /// One sentence.
    pub text: String,
    /// The exception's class name, when the script raised one.
    pub exception: Option<String>,
    /// `file:line` of the innermost frame in the user's files.
    pub at: Option<String>,
    /// The whole traceback.
    pub traceback: Option<String>,
}

impl Ended {
    /// The failure: the script's exception, or an error, with `exited`
    /// (how the command ended) after the sentence.
    pub fn failure(self, exited: Option<String>) -> Failure {
        let message = match exited {
            Some(how) => format!("{} ({how})", self.text),
            None => self.text,
        };
        match self.exception {
            Some(exception) => Failure::Script {
                message,
                exception: Some(exception),
                at: self.at,
                traceback: self.traceback,
            },
            None => Failure::Error { message },
        }
    }
}

/// Why the unit's processes ended without a complete window; `None` when
/// no record says.
pub fn ended(files: &[ProcFile], asked: u32, loader: u32) -> Option<Ended> {
    for f in files {
        if let Some(e) = f.first("error") {
            return Some(plain(format!(
                "the instrumentation failed in {}: {}",
                e["where"].as_str().unwrap_or("?"),
                e["message"].as_str().unwrap_or("?")
            )));
        }
    }
    let e = files.iter().find_map(|f| f.first("end"))?;
    let reason = e["reason"].as_str().unwrap_or("?");
    let phase = e["phase_at_end"].as_str().unwrap_or("?");
    let when = match phase {
        "no DataLoader iterated" | "measured loader never iterated" => {
            format!("before it iterated a DataLoader (the measured one: iteration index {loader})")
        }
        _ => format!(
            "after {} of {asked} steps, in its {phase}",
            e["steps"].as_u64().unwrap_or(0)
        ),
    };
    let exception = e["exception"].as_str().map(String::from);
    let at = e["user_frame"]
        .as_object()
        .or_else(|| e["worker_frame"].as_object())
        .map(|f| frame(&Value::Object(f.clone())));
    // The user's exception first, at the line of their own code.
    let mut text = match &exception {
        Some(ex) => {
            let mut t = format!("{ex}: {}", first_line(e["message"].as_str().unwrap_or("")));
            if let Some((place, code)) = &at {
                t += &format!(", at {place}");
                if let Some(code) = code {
                    t += &format!(" ({code})");
                }
            }
            format!("{t}; {when}")
        }
        None => format!("the script ended ({reason}) {when}"),
    };
    if e["pending_step"]["waiting_for_data"] == true || e["pending_step"]["in_next"] == true {
        text += "; it was waiting for data";
    }
    Some(Ended {
        text,
        exception,
        at: at.map(|(place, _)| place),
        traceback: e["traceback"].as_str().map(String::from),
    })
}

fn plain(text: String) -> Ended {
    Ended {
        text,
        exception: None,
        at: None,
        traceback: None,
    }
}

/// `train.py:42 in __getitem__` (the file's name, not its whole path) and
/// the source line.
fn frame(f: &Value) -> (String, Option<String>) {
    let file = f["file"].as_str().unwrap_or("?");
    let name = file.rsplit('/').next().unwrap_or(file);
    let mut place = format!("{name}:{}", f["line"].as_u64().unwrap_or(0));
    if let Some(func) = f["function"].as_str().filter(|s| *s != "<module>") {
        place += &format!(" in {func}");
    }
    let code = f["code"].as_str().map(str::trim).filter(|c| !c.is_empty());
    (place, code.map(|c| format!("`{c}`")))
}

/// The first line of an exception's text (a DataLoader's wrapped worker
/// error quotes a whole traceback after it).
fn first_line(message: &str) -> &str {
    message
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}
