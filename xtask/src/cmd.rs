//! Running external commands: echo what runs, fail with the command line and its exit status.
use anyhow::{Context, Result, bail};
use std::ffi::OsStr;
use std::process::{Command, Output, Stdio};

/// A command to run, echoed before it runs.
pub(crate) struct Cmd {
    inner: Command,
    line: String,
}

impl Cmd {
    pub(crate) fn new(program: impl AsRef<OsStr>) -> Self {
        let program = program.as_ref();
        Self {
            inner: Command::new(program),
            line: program.to_string_lossy().into_owned(),
        }
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        let arg = arg.as_ref();
        self.line.push(' ');
        self.line.push_str(&quote(&arg.to_string_lossy()));
        self.inner.arg(arg);
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for a in args {
            self = self.arg(a);
        }
        self
    }

    pub(crate) fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.line = format!("{key}={} {}", value.as_ref().to_string_lossy(), self.line);
        self.inner.env(key, value);
        self
    }

    /// The command line as echoed.
    #[cfg(test)]
    pub(crate) fn line(&self) -> &str {
        &self.line
    }

    /// Runs with inherited stdio; fails unless it exits with status 0.
    pub(crate) fn run(mut self) -> Result<()> {
        eprintln!("$ {}", self.line);
        let status = self
            .inner
            .status()
            .with_context(|| format!("could not start `{}`", self.line))?;
        if !status.success() {
            bail!("`{}` failed: {status}", self.line);
        }
        Ok(())
    }

    /// Runs without echo, capturing stdout; fails (with its stderr) unless it exits with 0.
    pub(crate) fn read(mut self) -> Result<String> {
        let out = self.output()?;
        if !out.status.success() {
            bail!(
                "`{}` failed: {}\n{}",
                self.line,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim_end()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs without echo and reports only whether it exited with 0 (false if it cannot start).
    pub(crate) fn succeeds(mut self) -> bool {
        self.output().is_ok_and(|o| o.status.success())
    }

    fn output(&mut self) -> Result<Output> {
        self.inner
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("could not start `{}`", self.line))
    }
}

/// Quotes an argument for the echoed line when it holds characters a shell would split on.
fn quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// `cargo` as cargo itself was invoked (so the same toolchain builds everything).
pub(crate) fn cargo() -> Cmd {
    let mut c = Cmd::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    "cargo".clone_into(&mut c.line);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoed_line_quotes_what_a_shell_would_split() {
        let c = Cmd::new("pip")
            .arg("download")
            .arg("cuda-toolkit[cudart,cupti]==13.0.2")
            .arg("a b")
            .arg("it's");
        assert_eq!(
            c.line(),
            r"pip download 'cuda-toolkit[cudart,cupti]==13.0.2' 'a b' 'it'\''s'"
        );
    }

    #[test]
    fn a_failing_command_names_itself_and_its_status() {
        let err = Cmd::new("sh").args(["-c", "exit 3"]).run().unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("sh -c 'exit 3'"), "{msg}");
        assert!(msg.contains("exit status: 3"), "{msg}");
    }

    #[test]
    fn a_missing_program_is_a_clear_error() {
        let err = Cmd::new("no-such-program-stallscope").run().unwrap_err();
        assert!(
            err.to_string()
                .contains("could not start `no-such-program-stallscope`")
        );
    }
}
