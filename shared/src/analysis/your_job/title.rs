//! A job named by its script: `stallscope job -- python train.py --lr 0.1`
//! is "Job: train.py --lr 0.1", not the interpreter's path. The library, the
//! bundle page, compare and the terminal show a bundle by [`bundle_title`].

use crate::format::{Bundle, ParamValue};

use super::JOB_ID;

/// The longest a title's arguments run before they are cut with `…`.
const MAX_ARGS: usize = 48;

/// The script of a command line and its arguments: the first `.py` file,
/// else the module of `-m`, else the program's file name.
pub fn script_of(command: &str) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let base = |w: &str| w.rsplit('/').next().unwrap_or(w).to_string();
    let (at, name) = if let Some(i) = words.iter().position(|w| w.ends_with(".py")) {
        (i, base(words[i]))
    } else if let Some(i) = words.iter().position(|w| *w == "-m") {
        (i + 1, words.get(i + 1)?.to_string())
    } else {
        (0, base(words.first()?))
    };
    let args = words.get(at + 1..).unwrap_or_default().join(" ");
    Some(if args.is_empty() {
        name
    } else if args.chars().count() > MAX_ARGS {
        let cut: String = args.chars().take(MAX_ARGS - 1).collect();
        format!("{name} {cut}…")
    } else {
        format!("{name} {args}")
    })
}

/// A job bundle's title by its script (`Job: train.py`); `None` for a
/// bundle without a job command.
pub fn job_title(b: &Bundle) -> Option<String> {
    let e = b.experiment(JOB_ID)?;
    let command = match e.settings.get("command")? {
        ParamValue::Text(s) => s.as_str(),
        _ => return None,
    };
    Some(format!("Job: {}", script_of(command)?))
}

/// The title a bundle is shown by: a job's by its script (the runner titles
/// it by its first word, often the interpreter), any other as written.
pub fn bundle_title(b: &Bundle) -> String {
    job_title(b).unwrap_or_else(|| b.title.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_not_the_interpreter() {
        let s = |c: &str| script_of(c).unwrap();
        assert_eq!(
            s("/root/.cache/venv/bin/python fixtures/job/train_slow_dataset.py"),
            "train_slow_dataset.py"
        );
        assert_eq!(s("python3 -u train.py --lr 0.1"), "train.py --lr 0.1");
        assert_eq!(
            s("python -m my.trainer --epochs 2"),
            "my.trainer --epochs 2"
        );
        assert_eq!(s("./train"), "train");
        let long = format!("python t.py {}", "--flag ".repeat(20));
        assert!(s(&long).ends_with('…') && s(&long).chars().count() == "t.py ".len() + MAX_ARGS);
        assert_eq!(script_of("  "), None);
    }
}
