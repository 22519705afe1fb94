//! Narrow faces: a runner crate's `lib.rs` exports what other crates use
//! and nothing else, so no other crate (their tests, benches, xtask and
//! `tests/` included) reaches into its modules. A module of a runner crate
//! is private by rule; the few kept public on purpose are [`API`], each
//! with why and each named in its crate's `lib.rs` doc, and they re-export
//! their own parts the same way. Findings (`wide face`, `reach-in`):
//! - a `pub mod` in a runner crate's root that is not listed, or in a
//!   listed namespace; a listed one its root does not declare `pub mod` or
//!   its `//!` doc does not name;
//! - a path written outside crate `x`, `stallscope_x::m…`, where `m` is a
//!   module of `x` that is not listed (unless `m` is also the name of an
//!   item the root re-exports and the path ends there: `stallscope_job::run`
//!   the function, not the module), or `stallscope_x::ns::m…` where `m` is
//!   a module of the listed namespace `ns`, on the same terms.
//!
//! The bundle crate (`stallscope-bundle`, a format library whose namespaces
//! are its documented API) is not a runner crate.
use anyhow::{Context, Result};
use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::modules::flatten_use;

/// The runner crates whose faces are held narrow: crate name, folder.
pub(crate) const RUNNER_CRATES: &[(&str, &str)] = &[
    ("stallscope_core", "runner/core"),
    ("stallscope_torch", "runner/torch"),
    ("stallscope_wgpu", "runner/wgpu"),
    ("stallscope_peers", "runner/peers"),
    ("stallscope_python", "runner/python"),
    ("stallscope_job", "runner/job"),
    ("stallscope_loader", "runner/loader"),
];

/// The listed API namespaces: crate, module, why (tests pass their own).
pub(crate) type Api<'a> = &'a [(&'a str, &'a str, &'a str)];

/// Modules a runner crate keeps public on purpose: crate, module, why.
pub(crate) const API: Api<'static> = &[
    (
        "stallscope_core",
        "suite",
        "the suite file's layers and a dozen plan types every back end reads",
    ),
    (
        "stallscope_core",
        "grid",
        "a loader sweep's points: `grid::points`, `grid::configuration`",
    ),
    (
        "stallscope_core",
        "ranks",
        "the rank layout, barrier and store: `ranks::start`, `ranks::current`",
    ),
    (
        "stallscope_core",
        "cost",
        "CPU and memory accounting and its sampler (not the loader's `Sampler`)",
    ),
    (
        "stallscope_loader",
        "idx",
        "FashionMNIST's IDX files: `idx::read_pair`, `idx::IMAGES_FILE`",
    ),
    (
        "stallscope_loader",
        "pipeline",
        "the image pipeline's stages, held to `pipeline::reference` by tests/pipeline.rs",
    ),
];

/// A crate root's (or a namespace's) face: its modules (name → public,
/// line), the names it re-exports, and the faces of its listed namespaces.
#[derive(Debug, Default)]
pub(crate) struct Face {
    pub(crate) modules: BTreeMap<String, (bool, usize)>,
    pub(crate) exports: BTreeSet<String>,
    pub(crate) namespaces: BTreeMap<String, Face>,
}

/// One way a face is wider than the rule allows.
#[derive(Debug, PartialEq)]
pub(crate) struct Finding {
    /// The file, relative to the repository.
    pub(crate) file: String,
    pub(crate) line: usize,
    pub(crate) what: String,
}

/// The faces of every runner crate under `repo`, keyed by crate name, with
/// those of its listed namespaces.
pub(crate) fn faces(repo: &Path, api: Api) -> Result<BTreeMap<String, Face>> {
    let mut out = BTreeMap::new();
    for (krate, dir) in RUNNER_CRATES {
        let src = repo.join(dir).join("src");
        let mut face = face_of(&read(&src.join("lib.rs"))?)?;
        for (_, ns, _) in api.iter().filter(|(k, _, _)| k == krate) {
            let file = namespace_file(&src, ns);
            face.namespaces
                .insert(ns.to_string(), face_of(&read(&file)?)?);
        }
        out.insert(krate.to_string(), face);
    }
    Ok(out)
}

/// The file of the top-level module `ns` under `src`.
pub(crate) fn namespace_file(src: &Path, ns: &str) -> std::path::PathBuf {
    let flat = src.join(format!("{ns}.rs"));
    if flat.is_file() {
        flat
    } else {
        src.join(ns).join("mod.rs")
    }
}

fn read(file: &Path) -> Result<String> {
    std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))
}

/// The modules a module's source declares and the names it re-exports.
pub(crate) fn face_of(text: &str) -> Result<Face> {
    let ast = syn::parse_file(text)?;
    let mut face = Face::default();
    for item in &ast.items {
        match item {
            syn::Item::Mod(m) => {
                let public = matches!(m.vis, syn::Visibility::Public(_));
                let line = m.ident.span().start().line;
                face.modules.insert(m.ident.to_string(), (public, line));
            }
            syn::Item::Use(u) if matches!(u.vis, syn::Visibility::Public(_)) => {
                face.exports
                    .extend(flatten_use(&u.tree).into_iter().map(|(name, _)| name));
            }
            _ => {}
        }
    }
    Ok(face)
}

/// Whether `module` of `krate` is listed in `api`.
fn listed(api: Api, krate: &str, module: &str) -> bool {
    api.iter().any(|(k, m, _)| *k == krate && *m == module)
}

/// What is wrong with the root `lib_rel` (its text `lib_text`) of `krate`:
/// a `pub mod` not listed in `api`, a listed one not `pub` or not named
/// (between backticks) in the root's `//!` doc.
pub(crate) fn wide_root(
    api: Api,
    krate: &str,
    lib_rel: &str,
    lib_text: &str,
) -> Result<Vec<Finding>> {
    let face = face_of(lib_text)?;
    let doc: String = lib_text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    for (name, (public, line)) in &face.modules {
        if *public && !listed(api, krate, name) {
            out.push(Finding {
                file: lib_rel.into(),
                line: *line,
                what: format!(
                    "`pub mod {name}` widens {krate}'s face: make it `mod {name};` and re-export \
                     what other crates use, or list it in xtask/src/structure/faces.rs with why"
                ),
            });
        }
    }
    for (_, module, _) in api.iter().filter(|(k, _, _)| *k == krate) {
        let public = face.modules.get(*module).is_some_and(|(p, _)| *p);
        if !public || !doc.contains(&format!("`{module}`")) {
            out.push(Finding {
                file: lib_rel.into(),
                line: 1,
                what: format!(
                    "API namespace `{module}` must be `pub mod {module}` and named in the \
                     crate's `//!` doc with why"
                ),
            });
        }
    }
    Ok(out)
}

/// A listed namespace's `pub mod`s (`ns_rel`, its text `ns_text`): its
/// parts are private and re-exported by the namespace, as a root's are.
pub(crate) fn wide_namespace(ns_rel: &str, ns_text: &str) -> Result<Vec<Finding>> {
    let face = face_of(ns_text)?;
    Ok(face
        .modules
        .iter()
        .filter(|(_, (public, _))| *public)
        .map(|(name, (_, line))| Finding {
            file: ns_rel.into(),
            line: *line,
            what: format!(
                "`pub mod {name}` in an API namespace: make it `mod {name};` and re-export \
                 what other crates use from the namespace"
            ),
        })
        .collect())
}

/// Every path in `text` (a Rust source, macro bodies included) that names
/// a private-by-rule module of a runner crate: (line, the path as written).
pub(crate) fn reach_ins(
    api: Api,
    text: &str,
    faces: &BTreeMap<String, Face>,
) -> Result<Vec<(usize, String)>> {
    let stream: TokenStream = text
        .parse()
        .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?;
    let mut out = Vec::new();
    scan(api, stream, faces, &mut out);
    out.sort();
    Ok(out)
}

fn scan(
    api: Api,
    stream: TokenStream,
    faces: &BTreeMap<String, Face>,
    out: &mut Vec<(usize, String)>,
) {
    let toks: Vec<TokenTree> = stream.into_iter().collect();
    for (i, t) in toks.iter().enumerate() {
        match t {
            TokenTree::Group(g) => scan(api, g.stream(), faces, out),
            TokenTree::Ident(id) => {
                let krate = id.to_string();
                let Some(face) = faces.get(&krate) else {
                    continue;
                };
                if !is_path_sep(&toks, i + 1) {
                    continue;
                }
                let line = id.span().start().line;
                for entry in entries(&toks[i + 3..]) {
                    if let Some(shown) = reach_in(api, &krate, face, &entry) {
                        out.push((line, format!("{krate}::{shown}")));
                    }
                }
            }
            _ => {}
        }
    }
}

/// The path `entry` (what follows `krate::`), shown, when it names a
/// private-by-rule module of `krate` or of one of its listed namespaces.
fn reach_in(api: Api, krate: &str, face: &Face, entry: &[TokenTree]) -> Option<String> {
    let Some(TokenTree::Ident(m)) = entry.first() else {
        return None;
    };
    let m = m.to_string();
    let continues = is_path_sep(entry, 1);
    if !face.modules.contains_key(&m) || (!continues && face.exports.contains(&m)) {
        return None;
    }
    if !listed(api, krate, &m) {
        return Some(shown(entry));
    }
    let ns = face.namespaces.get(&m)?;
    if !continues {
        return None;
    }
    entries(&entry[3..]).into_iter().find_map(|sub| {
        let Some(TokenTree::Ident(s)) = sub.first() else {
            return None;
        };
        let s = s.to_string();
        let private =
            ns.modules.contains_key(&s) && (is_path_sep(&sub, 1) || !ns.exports.contains(&s));
        private.then(|| format!("{m}::{}", shown(&sub)))
    })
}

/// `::` at `toks[i]`.
fn is_path_sep(toks: &[TokenTree], i: usize) -> bool {
    let colon = |t: Option<&TokenTree>, spacing: Option<Spacing>| {
        matches!(t, Some(TokenTree::Punct(p))
            if p.as_char() == ':' && spacing.is_none_or(|s| p.spacing() == s))
    };
    colon(toks.get(i), Some(Spacing::Joint)) && colon(toks.get(i + 1), None)
}

/// What follows a `::`: one path, or each entry of a `{…}` use group.
fn entries(toks: &[TokenTree]) -> Vec<Vec<TokenTree>> {
    match toks.first() {
        Some(TokenTree::Ident(_)) => vec![toks.to_vec()],
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
            let inner: Vec<TokenTree> = g.stream().into_iter().collect();
            inner
                .split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
                .filter(|e| !e.is_empty())
                .map(<[TokenTree]>::to_vec)
                .collect()
        }
        _ => Vec::new(),
    }
}

/// `a::b::C` from the tokens of a path (stops at anything else).
fn shown(toks: &[TokenTree]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while let Some(TokenTree::Ident(id)) = toks.get(i) {
        out.push_str(&id.to_string());
        if !is_path_sep(toks, i + 1) {
            break;
        }
        match toks.get(i + 3) {
            Some(TokenTree::Ident(_)) => out.push_str("::"),
            Some(TokenTree::Group(_)) => {
                out.push_str("::{…}");
                break;
            }
            _ => break,
        }
        i += 3;
    }
    out
}

#[cfg(test)]
mod tests;
