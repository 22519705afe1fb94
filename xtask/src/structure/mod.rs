//! `cargo xtask test`'s `structure` stage: the layering rules that a
//! compiler does not hold, checked over the sources so breaking one fails
//! CI. Module cycles in every crate (`graph`), functions over
//! [`lengths::MAX_LINES`] lines (`lengths`), declared dependencies never
//! named (`deps`), processes started outside `stallscope-python`
//! (`spawns`), paths into a runner crate's private modules (`faces`), and
//! the seams between crates: who depends on whom, who links a device
//! library, what the format crate and the viewer never do (`seams`).
//! Python's packages are held by `python/tests/test_layers.py`.
mod deps;
mod faces;
mod graph;
mod lengths;
mod modules;
mod seams;
mod spawns;

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// Every check over the workspace at `repo`; one line per finding, then an error.
pub(crate) fn run(repo: &Path) -> Result<()> {
    let mut findings = Vec::new();
    for member in members(repo)? {
        let dir = repo.join(&member);
        for root in ["src/lib.rs", "src/main.rs"] {
            let file = dir.join(root);
            if file.is_file() {
                findings.extend(cycles_of(&member, &file)?);
            }
        }
        findings.extend(unused_of(repo, &dir)?);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
            .with_context(|| format!("reading {member}/Cargo.toml"))?;
        findings.extend(seams::manifest_findings(&member, &manifest));
    }
    findings.extend(seams_in_sources(repo)?);
    findings.extend(long_functions(repo)?);
    findings.extend(spawns_outside(repo)?);
    findings.extend(wide_faces(repo)?);
    if findings.is_empty() {
        println!(
            "structure: no module cycle, no function over {} lines, no unused dependency, \
             no process started outside stallscope-python, no path into a runner crate's \
             private modules, no crossed seam",
            lengths::MAX_LINES
        );
        return Ok(());
    }
    for f in &findings {
        println!("{f}");
    }
    bail!("{} structure finding(s)", findings.len())
}

/// The workspace's members, from the root manifest.
fn members(repo: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(repo.join("Cargo.toml")).context("reading Cargo.toml")?;
    let doc: toml::Table = text.parse().context("parsing Cargo.toml")?;
    let members = doc
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(|m| m.as_array())
        .context("Cargo.toml: no [workspace] members")?;
    Ok(members
        .iter()
        .filter_map(|m| m.as_str().map(String::from))
        .collect())
}

fn cycles_of(member: &str, root: &Path) -> Result<Vec<String>> {
    let mods = modules::crate_modules(root)?;
    let g = graph::uses(&mods);
    Ok(graph::cycles(&g)
        .into_iter()
        .map(|c| {
            let names: Vec<String> = c.iter().map(graph::show).collect();
            let edges = cycle_edges(&g, &c);
            format!(
                "cycle in {member} ({}): {} [{}]",
                root.file_name().unwrap_or_default().to_string_lossy(),
                names.join(" ↔ "),
                edges
            )
        })
        .collect())
}

/// The uses inside one cycle, `a → b`, so the finding says what to cut.
fn cycle_edges(g: &graph::Graph, comp: &[modules::ModPath]) -> String {
    let mut out = Vec::new();
    for a in comp {
        for b in g.get(a).into_iter().flatten() {
            if comp.contains(b) {
                out.push(format!("{} → {}", graph::show(a), graph::show(b)));
            }
        }
    }
    out.join(", ")
}

fn unused_of(repo: &Path, dir: &Path) -> Result<Vec<String>> {
    Ok(deps::unused(&dir.join("Cargo.toml"))?
        .into_iter()
        .map(|u| {
            let rel = u.manifest.strip_prefix(repo).unwrap_or(&u.manifest);
            format!(
                "unused dependency: {} [{}] {} (remove it, or list it under \
                 [package.metadata.cargo-machete] ignored with why)",
                rel.display(),
                u.table,
                u.name
            )
        })
        .collect())
}

/// Every `.rs` file of the workspace's crates (target folders left out).
fn rust_files(repo: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for member in members(repo)? {
        collect(&repo.join(member), &mut out);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        if p.is_dir() {
            if name != "target"
                && name != "node_modules"
                && !name.to_string_lossy().starts_with('.')
            {
                collect(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn long_functions(repo: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for file in rust_files(repo)? {
        let rel = file.strip_prefix(repo).unwrap_or(&file);
        for (name, line, lines) in
            lengths::long_functions(&file).with_context(|| format!("reading {}", rel.display()))?
        {
            out.push(format!(
                "long function: {}:{line} fn {name} is {lines} lines (at most {}: split it where it mixes concerns)",
                rel.display(),
                lengths::MAX_LINES
            ));
        }
    }
    Ok(out)
}

fn seams_in_sources(repo: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for file in rust_files(repo)? {
        let rel = file.strip_prefix(repo).unwrap_or(&file);
        if seams::checked(rel) {
            let text = std::fs::read_to_string(&file)?;
            let rel_s = rel.to_string_lossy().replace('\\', "/");
            out.extend(seams::source_findings(&rel_s, &text));
        }
    }
    Ok(out)
}

fn spawns_outside(repo: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for file in rust_files(repo)? {
        let rel = file.strip_prefix(repo).unwrap_or(&file);
        let rel_s = rel.to_string_lossy().replace('\\', "/");
        if !spawns::is_product(rel) && !rel_s.ends_with("build.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file)?;
        for line in spawns::spawns(&rel_s, &text) {
            out.push(format!(
                "process started outside stallscope-python: {rel_s}:{line} (Python processes \
                 have one owner, runner/python; another program needs an entry in \
                 xtask/src/structure/spawns.rs with why)"
            ));
        }
    }
    Ok(out)
}

/// Runner crates' roots (and listed namespaces) wider than the rule, and
/// paths from other crates into their private modules.
fn wide_faces(repo: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for (krate, dir) in faces::RUNNER_CRATES {
        let rel = format!("{dir}/src/lib.rs");
        let text =
            std::fs::read_to_string(repo.join(&rel)).with_context(|| format!("reading {rel}"))?;
        let mut found = faces::wide_root(faces::API, krate, &rel, &text)?;
        for (_, ns, _) in faces::API.iter().filter(|(k, _, _)| k == krate) {
            let file = faces::namespace_file(&repo.join(dir).join("src"), ns);
            let ns_rel = file
                .strip_prefix(repo)
                .unwrap_or(&file)
                .display()
                .to_string();
            let ns_text =
                std::fs::read_to_string(&file).with_context(|| format!("reading {ns_rel}"))?;
            found.extend(faces::wide_namespace(&ns_rel, &ns_text)?);
        }
        out.extend(
            found
                .into_iter()
                .map(|f| format!("wide face: {}:{} {}", f.file, f.line, f.what)),
        );
    }
    let all = faces::faces(repo, faces::API)?;
    for file in rust_files(repo)? {
        let rel = file.strip_prefix(repo).unwrap_or(&file);
        let rel_s = rel.to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(&file)?;
        let found = faces::reach_ins(faces::API, &text, &all)
            .with_context(|| format!("reading {rel_s}"))?;
        for (line, path) in found {
            out.push(format!(
                "reach-in: {rel_s}:{line} {path} (a private module of another crate: use \
                 what that crate's root re-exports)"
            ));
        }
    }
    Ok(out)
}
