//! Which module of a crate uses which: every path a module's code names,
//! resolved through `crate`, `super`, `self`, child modules, `use` aliases
//! and re-exports to the module that defines the item; then the cycles
//! (strongly connected components of more than one module).
use super::modules::{ModPath, Module};
use std::collections::{BTreeMap, BTreeSet};

/// Module → the modules it uses (itself left out).
pub(crate) type Graph = BTreeMap<ModPath, BTreeSet<ModPath>>;

/// The uses graph of one crate's modules.
pub(crate) fn uses(mods: &BTreeMap<ModPath, Module>) -> Graph {
    let mut g = Graph::new();
    for (here, m) in mods {
        let targets = g.entry(here.clone()).or_default();
        for p in &m.paths {
            if let Some(t) = resolve(mods, here, p, 0)
                && &t != here
            {
                targets.insert(t);
            }
        }
    }
    g
}

/// The module defining what `path` names when written in module `here`;
/// `None` for an outside crate, a local item, or a name not found.
pub(crate) fn resolve(
    mods: &BTreeMap<ModPath, Module>,
    here: &ModPath,
    path: &[String],
    depth: usize,
) -> Option<ModPath> {
    if depth > 8 || path.is_empty() {
        return None;
    }
    let (start, rest) = start_of(mods, here, path, depth)?;
    descend(mods, start, rest, depth)
}

/// Where a path begins: the module its first segment names, and the rest.
fn start_of<'p>(
    mods: &BTreeMap<ModPath, Module>,
    here: &ModPath,
    path: &'p [String],
    depth: usize,
) -> Option<(ModPath, &'p [String])> {
    let first = path[0].as_str();
    match first {
        "crate" => Some((Vec::new(), &path[1..])),
        "self" => Some((here.clone(), &path[1..])),
        "super" => {
            let mut m = here.clone();
            let mut i = 0;
            while path.get(i).is_some_and(|s| s == "super") {
                m.pop()?;
                i += 1;
            }
            Some((m, &path[i..]))
        }
        _ => {
            let module = mods.get(here)?;
            if module.children.iter().any(|c| c == first) {
                return Some((here.clone(), path));
            }
            let alias = module.aliases.get(first)?;
            if alias.len() == 1 && alias[0] == first {
                return None;
            }
            let mut full = alias.clone();
            full.extend_from_slice(&path[1..]);
            let t = resolve(mods, here, &full, depth + 1)?;
            Some((t, &[]))
        }
    }
}

/// Walk down child modules and through re-exports as far as `rest` names them.
fn descend(
    mods: &BTreeMap<ModPath, Module>,
    mut at: ModPath,
    rest: &[String],
    depth: usize,
) -> Option<ModPath> {
    for (i, seg) in rest.iter().enumerate() {
        let m = mods.get(&at)?;
        if m.children.iter().any(|c| c == seg) {
            at.push(seg.clone());
            continue;
        }
        if let Some(target) = m.reexports.get(seg) {
            let mut full = target.clone();
            full.extend_from_slice(&rest[i + 1..]);
            return resolve(mods, &at, &full, depth + 1).or(Some(at));
        }
        break;
    }
    Some(at)
}

/// Every cycle: the strongly connected components of more than one module,
/// each sorted, in a stable order (Tarjan's algorithm).
pub(crate) fn cycles(g: &Graph) -> Vec<Vec<ModPath>> {
    struct Tarjan<'g> {
        g: &'g Graph,
        index: BTreeMap<&'g ModPath, usize>,
        low: BTreeMap<&'g ModPath, usize>,
        stack: Vec<&'g ModPath>,
        on_stack: BTreeSet<&'g ModPath>,
        next: usize,
        out: Vec<Vec<ModPath>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g ModPath) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                if !self.g.contains_key(w) {
                    continue;
                }
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    comp.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = Tarjan {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

/// `crate`, or `measure::slot`.
pub(crate) fn show(p: &ModPath) -> String {
    if p.is_empty() {
        "crate".into()
    } else {
        p.join("::")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structure::modules::crate_modules;

    /// A crate of `files` (name → text) in a temporary folder; its cycles, shown.
    fn cycles_in(files: &[(&str, &str)]) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let mods = crate_modules(&dir.path().join("lib.rs")).unwrap();
        cycles(&uses(&mods))
            .iter()
            .map(|c| c.iter().map(show).collect::<Vec<_>>().join(" "))
            .collect()
    }

    #[test]
    fn two_modules_using_each_other_are_a_cycle() {
        let found = cycles_in(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::X;\npub struct Y(X);\n"),
            ("b.rs", "pub struct X;\nfn f() -> super::a::Y { todo() }\n"),
        ]);
        assert_eq!(found, ["a b"]);
    }

    #[test]
    fn a_use_through_a_re_export_reaches_the_defining_module() {
        let found = cycles_in(&[
            ("lib.rs", "mod a;\nmod b;\npub use a::Y;\n"),
            ("a.rs", "pub struct Y;\nfn f() { crate::b::g(); }\n"),
            ("b.rs", "pub fn g() -> crate::Y { crate::Y }\n"),
        ]);
        assert_eq!(found, ["a b"], "b uses Y, defined in a, through the root");
    }

    #[test]
    fn layers_and_test_modules_are_not_cycles() {
        let found = cycles_in(&[
            ("lib.rs", "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n"),
            (
                "a.rs",
                "pub struct Y;\n#[cfg(test)]\nmod t { use crate::b::g; }\n",
            ),
            ("b.rs", "use crate::a::Y;\npub fn g() -> Y { Y }\n"),
            ("tests.rs", "use crate::b::g;\n"),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_parent_and_a_child_using_each_other_are_a_cycle() {
        let found = cycles_in(&[
            ("lib.rs", "mod p;\n"),
            ("p/mod.rs", "mod c;\npub struct T;\nfn f() { c::g(); }\n"),
            ("p/c.rs", "pub fn g() -> super::T { super::T }\n"),
        ]);
        assert_eq!(found, ["p p::c"]);
    }
}
