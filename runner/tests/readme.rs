//! The README shows only reports the runner prints: every block between
//! `<!-- report: BUNDLE -->` and `<!-- /report -->` in README.md (which
//! must have one) and in docs/*.md is checked against what the real
//! `stallscope report BUNDLE` prints today (run from the repository's root,
//! the default table format). The block's lines (its code fences aside)
//! must be contiguous lines of that output, in order; a line `[...]` in the
//! block marks a cut, and each part between cuts must then be contiguous,
//! the parts in order. A failure names the file's first line that differs
//! and what the report prints there, so no Markdown page can show a report
//! the runner does not print.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The line that marks a cut inside a block.
const CUT: &str = "[...]";
const OPEN: &str = "<!-- report: ";
const CLOSE: &str = "<!-- /report -->";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the repository's root")
}

/// One report block of the README: the bundle it names, and its lines with
/// their line numbers in the README (code fences left out).
#[derive(Debug, Clone)]
struct Block {
    /// The Markdown file, relative to the repository's root.
    file: String,
    bundle: String,
    lines: Vec<(usize, String)>,
}

/// Every report block of `readme`; a block left open is an error.
fn blocks(file: &str, readme: &str) -> Result<Vec<Block>, String> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in readme.lines().enumerate() {
        let n = i + 1;
        let t = line.trim();
        if let Some(rest) = t.strip_prefix(OPEN) {
            if let Some(b) = &open {
                return Err(format!(
                    "{file}:{n}: a report block opens inside the block of {}",
                    b.bundle
                ));
            }
            let bundle = rest.strip_suffix("-->").map(str::trim).ok_or_else(|| {
                format!("{file}:{n}: expected `{OPEN}BUNDLE -->`, found {line:?}")
            })?;
            open = Some(Block {
                file: file.to_string(),
                bundle: bundle.to_string(),
                lines: Vec::new(),
            });
        } else if t == CLOSE {
            let b = open
                .take()
                .ok_or_else(|| format!("{file}:{n}: `{CLOSE}` with no block open"))?;
            out.push(b);
        } else if let Some(b) = &mut open
            && !t.starts_with("```")
        {
            b.lines.push((n, line.trim_end().to_string()));
        }
    }
    match open {
        Some(b) => Err(format!("{file}: the block of {} never closes", b.bundle)),
        None => Ok(out),
    }
}

/// The parts of a block between its cuts.
fn parts(block: &Block) -> Vec<&[(usize, String)]> {
    block
        .lines
        .split(|(_, l)| l.trim() == CUT)
        .filter(|p| !p.is_empty())
        .collect()
}

/// Check `block` against the report's `output`: each part contiguous, the
/// parts in order. The error names the README's first line that differs.
fn check(block: &Block, output: &str) -> Result<(), String> {
    if block.lines.iter().all(|(_, l)| l.trim() == CUT) {
        return Err(format!(
            "{}: the block of {} is empty",
            block.file, block.bundle
        ));
    }
    let real: Vec<&str> = output.lines().map(str::trim_end).collect();
    let mut from = 0;
    for part in parts(block) {
        from = find(part, &real, from).map_err(|(n, readme, there)| {
            format!(
                "{}:{n} is not what `stallscope report {}` prints:\n  {}: {readme:?}\n  \
                 report: {there}\n--- the report\n{output}",
                block.file, block.bundle, block.file
            )
        })?;
    }
    Ok(())
}

/// Where `part` ends in `real`, searched from line `from`; else the README
/// line that differs in the nearest match (its number, its text, and what
/// the report has there).
fn find(
    part: &[(usize, String)],
    real: &[&str],
    from: usize,
) -> Result<usize, (usize, String, String)> {
    // (lines that agree, where the match starts) of the best start so far.
    let mut best: Option<(usize, usize)> = None;
    for start in from..real.len() {
        let agree = part
            .iter()
            .zip(&real[start..])
            .take_while(|((_, l), r)| l == *r)
            .count();
        if agree == part.len() {
            return Ok(start + part.len());
        }
        if agree > 0 && best.is_none_or(|(a, _)| agree > a) {
            best = Some((agree, start));
        }
    }
    let (n, readme) = match best {
        Some((agree, _)) => part[agree].clone(),
        None => part[0].clone(),
    };
    let there = match best {
        Some((agree, start)) => real
            .get(start + agree)
            .map_or("nothing (the report ends)".to_string(), |r| {
                format!("{r:?}")
            }),
        None => format!(
            "no such line (after the block's previous lines, from the report's line {})",
            from + 1
        ),
    };
    Err((n, readme, there))
}

/// What `stallscope report BUNDLE` prints, run from the repository's root.
fn report(bundle: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(["report", bundle])
        .current_dir(repo())
        .output()
        .expect("run stallscope report");
    assert!(
        o.status.success(),
        "stallscope report {bundle}: exit {:?}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("the report is UTF-8")
}

/// The report blocks of `file` (relative to the repository's root).
fn file_blocks(file: &str) -> Vec<Block> {
    let text = std::fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    blocks(file, &text).unwrap_or_else(|e| panic!("{e}"))
}

fn readme_blocks() -> Vec<Block> {
    let blocks = file_blocks("README.md");
    assert!(
        !blocks.is_empty(),
        "README.md shows no report between `{OPEN}BUNDLE -->` and `{CLOSE}`"
    );
    blocks
}

/// The report blocks of docs/*.md, in file order.
fn docs_blocks() -> Vec<Block> {
    let mut files: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    files.sort();
    files.iter().flat_map(|f| file_blocks(f)).collect()
}

#[test]
fn every_report_in_the_readme_and_docs_is_what_the_runner_prints() {
    for b in readme_blocks().into_iter().chain(docs_blocks()) {
        if let Err(e) = check(&b, &report(&b.bundle)) {
            panic!("{e}");
        }
    }
}

/// The check itself fails on the README's own block edited: one character
/// of a line, a line left out, two lines swapped, a part moved before
/// another; each names the README line that differs.
#[test]
fn an_edited_readme_block_is_caught_at_its_line() {
    let b = readme_blocks().remove(0);
    let real = report(&b.bundle);
    check(&b, &real).unwrap_or_else(|e| panic!("{e}"));
    let idx: Vec<usize> = (0..b.lines.len())
        .filter(|&i| b.lines[i].1.trim() != CUT && !b.lines[i].1.trim().is_empty())
        .collect();
    assert!(idx.len() >= 3, "the README's block has lines to edit");
    let (i, j) = (idx[idx.len() / 2], idx[idx.len() / 2 + 1]);

    let mut edited = b.clone();
    edited.lines[i].1 = edited.lines[i]
        .1
        .replacen(|c: char| c.is_ascii_digit(), "7", 1)
        + "!";
    let e = check(&edited, &real).expect_err("a changed line");
    assert!(
        e.starts_with(&format!("README.md:{} is not", b.lines[i].0)),
        "{e}"
    );

    let mut left_out = b.clone();
    left_out.lines.remove(i);
    let e = check(&left_out, &real).expect_err("a line left out");
    assert!(
        e.starts_with(&format!("README.md:{} is not", b.lines[j].0)),
        "{e}"
    );

    let mut swapped = b.clone();
    swapped.lines.swap(i, j);
    assert!(check(&swapped, &real).is_err(), "two lines swapped");

    if parts(&b).len() >= 2 {
        let mut moved = b.clone();
        let first_cut = moved
            .lines
            .iter()
            .position(|(_, l)| l.trim() == CUT)
            .unwrap();
        moved.lines.rotate_left(first_cut + 1);
        assert!(check(&moved, &real).is_err(), "parts out of order");
    }
}

#[test]
fn a_block_left_open_or_closed_twice_is_refused() {
    let open = format!("a\n{OPEN}fixtures/x.json -->\n```text\nline\n");
    assert!(blocks("R.md", &open).unwrap_err().contains("never closes"));
    let twice = format!("{OPEN}x -->\n{CLOSE}\n{CLOSE}\n");
    assert!(blocks("R.md", &twice).unwrap_err().starts_with("R.md:3:"));
    let good = format!("{OPEN}x.json -->\n```text\n  a\n[...]\nb\n```\n{CLOSE}\n");
    let b = blocks("R.md", &good).unwrap();
    assert_eq!(b[0].bundle, "x.json");
    assert_eq!(parts(&b[0]).len(), 2);
    assert!(check(&b[0], "  a\nz\nb\n").is_ok());
    assert!(check(&b[0], "b\n  a\n").is_err());
}
