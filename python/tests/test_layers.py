"""The Python packages' import graph: no circle between modules, and the layers kept apart.

Every module of python/stallscope_*/ (boot/sitecustomize.py included) is parsed with `ast`; each
`import` and `from ... import` (at module level or inside a function: a deferred import is still a
dependency) is resolved to the package's own modules. The rules:

1. **No circle**: no module reaches itself through the imports of the package modules (a package's
   `__init__` counts as a module). Deferring an import into a function does not break a circle, it
   hides one, so those count too.
2. **Layers**: `stallscope_steps` (the step clock, the device wait, peak memory: what every loop
   shares) imports neither `stallscope_job` nor `stallscope_peer`. `stallscope_job` (the
   instrumentation of a user's script) never imports `stallscope_peer` (the peers harness), nor
   the harness the job: what they share goes through `stallscope_steps`.
3. **No torch at the bottom's import**: `stallscope_steps`' modules do not import torch at module
   level (the job's start-up imports them before the script imports torch).

A test of the circle finder itself (a graph with a circle must be found) keeps rule 1 from passing
by finding nothing.
"""

from __future__ import annotations

import ast
import pathlib
import unittest

PYTHON = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "stallscope_steps": ("stallscope_job", "stallscope_peer"),
    "stallscope_job": ("stallscope_peer",),
    "stallscope_peer": ("stallscope_job",),
}


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PYTHON).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, pathlib.Path]:
    found = {}
    for package in sorted(PYTHON.glob("stallscope_*")):
        if package.is_dir():
            for path in sorted(package.rglob("*.py")):
                found[module_name(path)] = path
    return found


def _package_of(name: str, path: pathlib.Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imports(name: str, path: pathlib.Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level) for each import of one of `known`."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(n) for n in tree.body}
    package = _package_of(name, path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in known else prefix
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known or target.split(".")[0] in ("torch",):
                out.append((target, node.lineno, id(node) in top))
    return out


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: {t for t, _, _ in imports(name, path, known) if t in known and t != name}
            for name, path in found.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, or of one importing itself
    (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


class Layers(unittest.TestCase):
    def test_the_circle_finder_finds_circles(self):
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
        self.assertEqual(sorted(circles(edges)), [["a", "b", "c"], ["e"]])
        self.assertEqual(circles({"a": {"b"}, "b": set()}), [])

    def test_the_packages_are_found(self):
        names = set(modules())
        for expected in ("stallscope_steps.clock", "stallscope_job.window", "stallscope_peer.loop",
                         "stallscope_job.boot.sitecustomize"):
            self.assertIn(expected, names)
        self.assertIn("stallscope_steps.clock", graph()["stallscope_peer.loop"])
        self.assertIn("stallscope_job.training", graph()["stallscope_job.window"])

    def test_no_circle_between_modules(self):
        found = circles(graph())
        self.assertEqual(found, [], "import circles (each a set of modules that reach each other): "
                                    + "; ".join(" <-> ".join(c) for c in found))

    def test_layers(self):
        known = set(modules())
        broken = []
        for name, path in modules().items():
            banned = FORBIDDEN.get(name.split(".")[0], ())
            for target, line, _ in imports(name, path, known):
                if target.split(".")[0] in banned:
                    broken.append(f"{path.relative_to(PYTHON)}:{line}: {name} imports {target}")
        self.assertEqual(broken, [], "layer rule broken (see this file's docstring)")

    def test_the_shared_package_does_not_import_torch_at_module_level(self):
        known = set(modules())
        broken = [f"{path.relative_to(PYTHON)}:{line}"
                  for name, path in modules().items() if name.startswith("stallscope_steps")
                  for target, line, top in imports(name, path, known) if target == "torch" and top]
        self.assertEqual(broken, [], "torch imported at module level in stallscope_steps")


if __name__ == "__main__":
    unittest.main()
