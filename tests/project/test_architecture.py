"""The package layout rules, checked on the sources with ``ast`` (nothing is imported).

1. No import cycle among the modules of ``spark_windowing`` and all its sub-packages (the Spark
   plugin ``spark_windowing.datasource`` and its sub-packages by role, ``spark_windowing.tools``). Every import
   counts (module level and inside functions) except those under ``if TYPE_CHECKING:``, which
   never run. A package's implicit import by its submodules is not an edge; an explicit import
   of the package (``from spark_windowing import x``) is, unless ``x`` is a submodule.
2. No function-level import of a private name from another module (``from m import _x`` inside a
   function), nor of another package's private module. Helpers that several modules need live in
   a leaf module imported at the top. A package's private submodules are shared by its modules,
   which may import them lazily (``spark_windowing.datasource.tables.delta`` defers the ``deltalake`` import that way).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = tuple(sorted(".".join(p.parent.relative_to(ROOT).parts)
                        for p in (ROOT / "spark_windowing").rglob("__init__.py")))


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg.replace(".", "/")).glob("*.py")):
            name = pkg if path.stem == "__init__" else f"{pkg}.{path.stem}"
            out[name] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module):
    """(node, in_function) for every import that can run: TYPE_CHECKING blocks skipped."""
    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for c in child.orelse:
                    yield from walk_one(c, in_function)
                continue
            yield from walk_one(child, in_function)

    def walk_one(child, in_function):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function
        else:
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from walk(child, inner)

    yield from walk(tree, False)


def _targets(node: ast.Import | ast.ImportFrom, importer: str) -> list[tuple[str, str | None]]:
    """(project module imported, name taken from it or None) for one import statement."""
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in MODULES:
                out.append((alias.name, None))
        return out
    base = node.module or ""
    if node.level:  # relative import
        parts = importer.split(".")
        pkg = parts if importer in PACKAGES else parts[:-1]
        pkg = pkg[:len(pkg) - node.level + 1]
        base = ".".join(pkg + ([node.module] if node.module else []))
    if base not in MODULES:
        return out
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append((sub, None) if sub in MODULES else (base, alias.name))
    return out


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    private: list[str] = []
    for mod, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        for node, in_function in _imports(tree):
            for target, name in _targets(node, mod):
                if target != mod:
                    edges[mod].add(target)
                if not in_function or target == mod:
                    continue
                package = mod if mod in PACKAGES else mod.rsplit(".", 1)[0]
                foreign_private_module = target.rsplit(".", 1)[-1].startswith("_") and \
                    not target.startswith(package + ".")
                if (name is not None and name.startswith("_")) or foreign_private_module:
                    shown = f"{target}.{name}" if name else target
                    private.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {shown} in a function")
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_checker_sees_the_modules():
    edges, _ = _graph()
    assert "spark_windowing.operator.windowed" in edges and "spark_windowing.datasource.source.reader" in edges
    assert "spark_windowing.operator.spec" in edges["spark_windowing.operator.windowed"]
    assert "spark_windowing.datasource.upstreams.base" in edges["spark_windowing.datasource.upstreams.kafka"]


def test_no_import_cycles():
    edges, _ = _graph()
    assert _cycles(edges) == []


def test_no_function_level_import_of_private_names():
    _, private = _graph()
    assert private == []


@pytest.mark.parametrize("source, cycles", [
    ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
])
def test_cycle_finder(source, cycles):
    assert _cycles(source) == cycles


#: The core's folders (first-level sub-packages of ``spark_windowing`` outside the plugin and the
#: tools); the root modules (``errors``, ``panes``, ``_time``, ``testing``, ...) stand for themselves.
ROOT_PACKAGE = "spark_windowing"
OUTSIDE_CORE = ("datasource", "tools")


def _package(module: str) -> str:
    """``module`` collapsed to its first-level package (``spark_windowing.operator.spec`` ->
    ``spark_windowing.operator``); a module at the root, and the root package itself, stay as they are."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for mod, targets in edges.items():
        src = _package(mod)
        out.setdefault(src, set())
        for t in targets:
            out.setdefault(_package(t), set())
            if _package(t) != src:
                out[src].add(_package(t))
    return out


def test_no_package_level_import_cycles():
    """The folders of ``spark_windowing`` (``windows``, ``triggers``, ``aggregates``, ``operator``,
    ``state``, ``tools``, ``datasource``) and its root modules form a DAG: a cycle through two
    folders is a layering mistake even when no two modules import each other."""
    assert _cycles(_package_graph(_graph()[0])) == []


def test_the_package_graph_is_the_documented_layering():
    packages = _package_graph(_graph()[0])
    core = {f"{ROOT_PACKAGE}.{p}" for p in ("windows", "triggers", "aggregates", "operator", "state")}
    assert core <= set(packages)
    assert f"{ROOT_PACKAGE}.aggregates" in packages[f"{ROOT_PACKAGE}.windows"]
    assert {f"{ROOT_PACKAGE}.{p}" for p in ("windows", "triggers", "aggregates")} <= packages[f"{ROOT_PACKAGE}.operator"]
    assert f"{ROOT_PACKAGE}.operator" in packages[f"{ROOT_PACKAGE}.state"]


def _core_imports_outside(edges: dict[str, set[str]]) -> list[str]:
    """Imports of ``spark_windowing.datasource`` or ``spark_windowing.tools`` by a core module.
    The top-level package module is the exception: ``spark_windowing.register``, ``window``,
    ``attach_progress`` and ``ivy_settings_path`` re-export the plugin's and the tools' entry
    points, imported only when called."""
    outside = tuple(f"{ROOT_PACKAGE}.{p}" for p in OUTSIDE_CORE)
    return sorted(f"{m} imports {t}" for m, targets in edges.items() for t in targets
                  if m != ROOT_PACKAGE and not _package(m).startswith(outside)
                  and _package(t).startswith(outside))


def test_the_core_never_imports_the_plugin_or_the_tools():
    assert _core_imports_outside(_graph()[0]) == []


@pytest.mark.parametrize("source, cycles", [
    ({"spark_windowing.operator.spec": {"spark_windowing.windows.kinds"},
      "spark_windowing.windows.kinds": set(),
      "spark_windowing.windows.buffered": {"spark_windowing.operator.output"},
      "spark_windowing.operator.output": set()},
     [["spark_windowing.operator", "spark_windowing.windows"]]),
    ({"spark_windowing.operator.spec": {"spark_windowing.windows.kinds", "spark_windowing.errors"},
      "spark_windowing.windows.kinds": {"spark_windowing.errors"}, "spark_windowing.errors": set()}, []),
])
def test_package_cycle_finder(source, cycles):
    """No two modules import each other here, but their folders do."""
    assert _cycles(source) == []
    assert _cycles(_package_graph(source)) == cycles


def test_the_outside_import_checker_sees_one():
    edges = {"spark_windowing.operator.windowed": {"spark_windowing.datasource.storage"},
             "spark_windowing.tools.plot": {"spark_windowing.datasource.storage"},
             "spark_windowing.testing": {"spark_windowing.tools.plot"},
             "spark_windowing": {"spark_windowing.datasource"}}
    assert _core_imports_outside(edges) == [
        "spark_windowing.operator.windowed imports spark_windowing.datasource.storage",
        "spark_windowing.testing imports spark_windowing.tools.plot"]


def _long_without_reason(package: str, module_lines: int = 500, function_lines: int = 50) -> list[str]:
    """Modules over ``module_lines`` lines whose docstring gives no "Long module:" reason, and
    functions over ``function_lines`` lines whose docstring (or a comment right below the
    signature) gives no "Long:" reason."""
    out = []
    for name, path in MODULES.items():
        if not name.startswith(package + ".") and name != package:
            continue
        if package == "spark_windowing" and name.startswith("spark_windowing.datasource"):
            continue  # the plugin has its own check
        src = path.read_text()
        lines = src.splitlines()
        tree = ast.parse(src)
        if len(lines) > module_lines and "Long module:" not in (ast.get_docstring(tree) or ""):
            out.append(f"{path.relative_to(ROOT)}: {len(lines)} lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                head = "\n".join(lines[node.lineno - 1:node.body[0].lineno + 1])
                if length > function_lines and "Long:" not in (ast.get_docstring(node) or "") + head:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    return out


def test_long_operator_modules_and_functions_say_why():
    assert _long_without_reason("spark_windowing") == []


def test_long_plugin_modules_and_functions_say_why():
    assert _long_without_reason("spark_windowing.datasource") == []


def test_test_modules_have_unique_names():
    """The test directories are not packages: pytest imports each test file by its base name, and
    a second file of the same name anywhere under tests/ stops the whole run at collection."""
    from collections import Counter
    from pathlib import Path
    names = Counter(p.name for p in (Path(__file__).resolve().parents[1]).rglob("test_*.py"))
    assert [n for n, count in names.items() if count > 1] == []


#: The plugin's sub-packages by role, and the roles each may not import (module level or in a
#: function; ``TYPE_CHECKING`` imports aside). Data flows one way: options and storage at the
#: bottom, tables and upstreams over them, the source and the sink on top, side by side.
PLUGIN = "spark_windowing.datasource"
FORBIDDEN = {
    "source": {"sink"},
    "sink": {"source", "upstreams"},
    "storage": {"source", "sink", "options", "tables", "upstreams"},
    "tables": {"source", "sink", "options", "upstreams"},
    "upstreams": {"source", "sink"},
    "options": {"source", "sink", "upstreams"},
}


def _role(module: str) -> str | None:
    if not module.startswith(PLUGIN + "."):
        return None
    return module[len(PLUGIN) + 1:].split(".")[0]


def _forbidden_imports(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} imports {t}" for m, targets in edges.items() for t in targets
                  if _role(t) in FORBIDDEN.get(_role(m), ()))


def test_the_plugin_roles_import_one_way():
    assert _forbidden_imports(_graph()[0]) == []


def test_the_role_checker_sees_a_forbidden_import():
    edges = {f"{PLUGIN}.source.reader": {f"{PLUGIN}.sink.writer", f"{PLUGIN}.storage"},
             f"{PLUGIN}.storage.layout": {f"{PLUGIN}.options.config"}, f"{PLUGIN}.window_df": {f"{PLUGIN}.sink.lease"}}
    assert _forbidden_imports(edges) == [f"{PLUGIN}.source.reader imports {PLUGIN}.sink.writer",
                                         f"{PLUGIN}.storage.layout imports {PLUGIN}.options.config"]



def _long_classes(limit: int = 300) -> list[str]:
    """Classes over ``limit`` lines (nested ones count inside their outer class) whose docstring
    gives no "Long class:" reason."""
    out = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > limit \
                    and "Long class:" not in (ast.get_docstring(node) or ""):
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines")
    return out


def test_no_class_over_300_lines_without_a_reason():
    assert _long_classes() == []


def test_the_module_paths_of_the_first_release_are_gone():
    """0.1.0's paths (``datasource.maintenance``, ``datasource.packages``, ``datasource.jvm_archive``,
    ``datasource.options.parse_options``) were kept by a meta-path finder installed at every import
    of the plugin; 0.1.0 had no users, so they are dropped (docs/architecture.md) with the finder."""
    import importlib
    import sys
    for old in ("spark_windowing.datasource.maintenance", "spark_windowing.datasource.packages",
                "spark_windowing.datasource.jvm_archive"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)
    import spark_windowing.datasource  # noqa: F401
    assert not [f for f in sys.meta_path if type(f).__module__.startswith("spark_windowing")]


#: The steps of a shard's micro-batch (``spark_windowing.datasource.source.pipeline``): the calls
#: that only the pipeline makes in the plugin, so that no route re-implements a step.
PIPELINE = f"{PLUGIN}.source.pipeline"
STEP_CALLS = {"open_store", "step_parts", "step", "persist", "after_snapshot", "keep_open", "append_late_rows",
              "write_report", "collect_garbage"}
#: Each route and the pipeline steps it must call (the driver route runs the reader's sequence).
ROUTES = {f"{PLUGIN}.source.reader": {"open_shard", "step_shard", "finish_shard", "collect_shard_garbage"},
          f"{PLUGIN}.window_df": {"open_shard", "step_shard", "finish_shard", "collect_shard_garbage"},
          f"{PLUGIN}.source.driver": {"start_shard", "step_shard", "finish_shard"}}


def _called_names(path: Path) -> set[str]:
    """The names called in a module (``f(...)`` and ``x.f(...)``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return out


def _step_reimplementations(modules: dict[str, Path]) -> list[str]:
    """Plugin modules other than the pipeline that call one of a shard's step primitives."""
    return sorted(f"{m} calls {name}" for m, path in modules.items()
                  if m.startswith(PLUGIN + ".") and m != PIPELINE
                  for name in sorted(_called_names(path) & STEP_CALLS))


def test_only_the_shard_pipeline_runs_a_shards_steps():
    assert _step_reimplementations(MODULES) == []
    for route, steps in ROUTES.items():
        assert steps <= _called_names(MODULES[route]), f"{route} does not run the pipeline's steps"


def test_the_step_checker_sees_a_route_that_steps_the_store_itself(tmp_path):
    route = tmp_path / "window_df.py"
    route.write_text("def run(store, events):\n    out = store.step_parts(events)\n    store.persist(3)\n")
    assert _step_reimplementations({f"{PLUGIN}.window_df": route}) == [
        f"{PLUGIN}.window_df calls persist", f"{PLUGIN}.window_df calls step_parts"]


def _repeated_names(paths) -> list[str]:
    """Module file names (``__init__.py`` aside) that stand in more than one folder."""
    from collections import Counter
    names = Counter(p.name for p in paths if p.name != "__init__.py")
    return sorted(n for n, count in names.items() if count > 1)


def test_no_two_modules_share_a_name():
    """One name, one module: a newcomer who reads ``delta.py`` or ``reader.py`` knows which one."""
    assert _repeated_names(MODULES.values()) == []
    assert _repeated_names([Path("a/delta.py"), Path("b/delta.py"), Path("a/__init__.py"),
                            Path("b/__init__.py")]) == ["delta.py"]
