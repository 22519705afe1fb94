//! `stallscope validate`: check bundles against the format; every problem of
//! every file, each as one paragraph with its JSON path; exit 1 if any.

use std::path::PathBuf;
use std::process::ExitCode;

use stallscope_core::read_bundle_file;

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Bundle files (JSON).
    #[arg(required = true)]
    pub bundles: Vec<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let mut bad = 0usize;
    let mut report = Vec::new();
    for path in &args.bundles {
        match read_bundle_file(path) {
            Ok(b) => {
                let configs: usize = b.experiments.iter().map(|e| e.configurations.len()).sum();
                let runs: usize = b
                    .experiments
                    .iter()
                    .flat_map(|e| &e.configurations)
                    .map(|c| c.runs.len())
                    .sum();
                let provenance = if b.is_measured() {
                    "measured"
                } else {
                    "published"
                };
                if !args.json {
                    crate::outln!(
                        "{}: valid — format {}, {provenance}, {}, {}, {}",
                        path.display(),
                        b.schema_version,
                        plural(b.experiments.len(), "experiment"),
                        plural(configs, "configuration"),
                        plural(runs, "run")
                    );
                }
                report.push(serde_json::json!({"file": path, "valid": true, "problems": []}));
            }
            Err(e) => {
                bad += 1;
                let paragraphs = e.paragraphs();
                if !args.json {
                    for p in &paragraphs {
                        eprintln!("{p}");
                    }
                }
                report.push(
                    serde_json::json!({"file": path, "valid": false, "problems": paragraphs}),
                );
            }
        }
    }
    if args.json {
        crate::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else if bad > 0 {
        eprintln!("{bad} of {} bundle(s) invalid", args.bundles.len());
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}
