//! A crate's module tree read from its sources with `syn`: each module's
//! file, children, `use` aliases, re-exports and the paths its own code
//! names (test modules, `#[cfg(test)]`, are left out: tests may reach anywhere).
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// A module path inside one crate: `[]` is the crate root, `["measure", "slot"]` a child's child.
pub(crate) type ModPath = Vec<String>;

/// One module of a crate.
#[derive(Debug, Default)]
pub(crate) struct Module {
    pub(crate) children: Vec<String>,
    /// `use a::b::C as D;` (private): `D` → `a::b::C`, as written.
    pub(crate) aliases: BTreeMap<String, Vec<String>>,
    /// `pub use a::b::C;` (any visibility but private): `C` → `a::b::C`.
    pub(crate) reexports: BTreeMap<String, Vec<String>>,
    /// Every path the module's own code names (uses included, re-exports not).
    pub(crate) paths: Vec<Vec<String>>,
}

/// Every module of the crate rooted at `root_file` (a `lib.rs` or `main.rs`).
pub(crate) fn crate_modules(root_file: &Path) -> Result<BTreeMap<ModPath, Module>> {
    let mut out = BTreeMap::new();
    read_file(root_file, Vec::new(), true, &mut out)?;
    Ok(out)
}

fn read_file(
    file: &Path,
    path: ModPath,
    owns_dir: bool,
    out: &mut BTreeMap<ModPath, Module>,
) -> Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let ast = syn::parse_file(&text).with_context(|| format!("parsing {}", file.display()))?;
    let dir = if owns_dir {
        file.parent().unwrap_or(Path::new(".")).to_path_buf()
    } else {
        file.with_extension("")
    };
    read_items(&ast.items, &dir, path, out)
}

fn read_items(
    items: &[syn::Item],
    dir: &Path,
    path: ModPath,
    out: &mut BTreeMap<ModPath, Module>,
) -> Result<()> {
    let mut module = Module::default();
    let mut nested = Vec::new();
    for item in items {
        match item {
            syn::Item::Mod(m) if is_test(&m.attrs) => {}
            syn::Item::Mod(m) => {
                module.children.push(m.ident.to_string());
                nested.push(m);
            }
            syn::Item::Use(u) if is_test(&u.attrs) => {}
            syn::Item::Use(u) => {
                let public = !matches!(u.vis, syn::Visibility::Inherited);
                for (name, target) in flatten_use(&u.tree) {
                    if public {
                        module.reexports.insert(name, target);
                    } else {
                        module.paths.push(target.clone());
                        module.aliases.insert(name, target);
                    }
                }
            }
            other if item_is_test(other) => {}
            other => {
                let mut v = PathCollector::default();
                v.visit_item(other);
                module.paths.extend(v.paths);
            }
        }
    }
    out.insert(path.clone(), module);
    for m in nested {
        let mut child = path.clone();
        child.push(m.ident.to_string());
        match &m.content {
            Some((_, items)) => read_items(items, &dir.join(m.ident.to_string()), child, out)?,
            None => {
                let (file, owns) = child_file(dir, m)?;
                read_file(&file, child, owns, out)?;
            }
        }
    }
    Ok(())
}

/// The file of `mod name;` declared in a module whose children live in `dir`.
fn child_file(dir: &Path, m: &syn::ItemMod) -> Result<(PathBuf, bool)> {
    for attr in &m.attrs {
        if attr.path().is_ident("path")
            && let syn::Meta::NameValue(nv) = &attr.meta
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            let p = dir.join(s.value());
            let owns = p.file_name().is_some_and(|n| n == "mod.rs");
            return Ok((p, owns));
        }
    }
    let name = m.ident.to_string();
    let flat = dir.join(format!("{name}.rs"));
    if flat.is_file() {
        return Ok((flat, false));
    }
    let nested = dir.join(&name).join("mod.rs");
    if nested.is_file() {
        return Ok((nested, true));
    }
    anyhow::bail!(
        "mod {name}: neither {} nor {} exists",
        flat.display(),
        nested.display()
    )
}

/// `#[cfg(test)]` on an item.
pub(crate) fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

fn item_is_test(item: &syn::Item) -> bool {
    match item {
        syn::Item::Fn(f) => is_test(&f.attrs),
        syn::Item::Impl(i) => is_test(&i.attrs),
        syn::Item::Const(c) => is_test(&c.attrs),
        syn::Item::Static(s) => is_test(&s.attrs),
        syn::Item::Struct(s) => is_test(&s.attrs),
        syn::Item::Enum(e) => is_test(&e.attrs),
        _ => false,
    }
}

/// `use a::{b, c::d as e, f::*}` → (`b`, a::b), (`e`, a::c::d), (`*`, a::f).
pub(crate) fn flatten_use(tree: &syn::UseTree) -> Vec<(String, Vec<String>)> {
    fn walk(t: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) if n.ident == "self" => {
                let name = prefix.last().cloned().unwrap_or_default();
                out.push((name, prefix.clone()));
            }
            syn::UseTree::Name(n) => {
                let mut p = prefix.clone();
                p.push(n.ident.to_string());
                out.push((n.ident.to_string(), p));
            }
            syn::UseTree::Rename(r) => {
                let mut p = prefix.clone();
                p.push(r.ident.to_string());
                out.push((r.rename.to_string(), p));
            }
            syn::UseTree::Glob(_) => out.push(("*".into(), prefix.clone())),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, prefix, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

/// Every path of more than one segment, or starting with `crate`/`super`/`self`,
/// in an item (nested modules are read on their own).
#[derive(Default)]
struct PathCollector {
    paths: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        // One segment outside a `use` is a local, a prelude name or an
        // imported one (whose `use` is counted): never a module of its own.
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segs.len() > 1 {
            self.paths.push(segs);
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_item_mod(&mut self, _m: &'ast syn::ItemMod) {}
    /// `pub(crate)`, `pub(super)`: a visibility, not a use.
    fn visit_visibility(&mut self, _v: &'ast syn::Visibility) {}
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.paths
            .extend(flatten_use(&u.tree).into_iter().map(|(_, p)| p));
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
}
