"""Every import points down, and no imports go round in a cycle.

The layers, lowest first, are declared once in `LAYERS` (docs/architecture.md gives the rule of
each). Every module under src/cosmosfl is parsed with `ast`: module-level, function-level and
`if TYPE_CHECKING:` imports, relative ones resolved against the importing package, and
`importlib.import_module("...")` calls with a literal name. No module may import a layer above
its own; within one layer imports are free, but no chain of them may lead back to where it
started (`cycles`), across layers or within one.

Every kind of import above counts for cycles, TYPE_CHECKING-only ones too: a type checker
follows them, and an import deferred into a function or behind TYPE_CHECKING to dodge a cycle
still ties the two modules together (a handler typed against `Client` while `Client` imports
the handlers). Not counted: the import of a package's `__init__` that Python makes before any of
its submodules (every submodule would otherwise be in a cycle with a package that re-exports
it), and names a package re-exports lazily by a name -> module map (`cosmosfl.__init__`,
`experiment/__init__`), which import nothing until they are used.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

PACKAGE = "cosmosfl"
SRC = Path(__file__).resolve().parents[1] / "src" / PACKAGE

# Lowest first. A module belongs to the layer of its longest matching prefix.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("cosmosfl.core",)),
    ("data, models", ("cosmosfl.data", "cosmosfl.models")),
    ("learners", ("cosmosfl.learners",)),
    # Differential privacy of a site's learner: accountant and mechanisms (wrapped learners);
    # its audit runs whole federations, so it belongs to the experiment layer.
    ("privacy", ("cosmosfl.privacy",)),
    ("algorithms", ("cosmosfl.algorithms",)),
    ("client", ("cosmosfl.client", "cosmosfl.handlers")),
    ("engines", ("cosmosfl.engines",)),
    ("experiment", ("cosmosfl.experiment", "cosmosfl.presets", "cosmosfl.privacy.audit")),
    # Reads run directories: may import experiment's readers (rundir, grid, catalog, errors);
    # the experiment layer never imports it (runs write run directories, not reports).
    ("reporting", ("cosmosfl.reporting",)),
    # The conformance suites run algorithms on both engines and resume checkpoints.
    ("apps", ("cosmosfl.apps", "cosmosfl.bench", "cosmosfl.testing")),
    ("cli", ("cosmosfl.cli",)),
]
# The package root is the public facade: it re-exports names of every layer (lazily, by
# name), so its own imports are not checked, and what it defines itself may be imported from
# anywhere; anything else must be imported from the module that defines it.
ROOT_OWN_NAMES = frozenset({"__version__"})


def layer_of(module: str) -> int | None:
    """The index in LAYERS of `module`'s layer; None for a module no layer declares."""
    best, index = "", None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, index = prefix, i
    return index


def module_name(path: Path, root: Path) -> tuple[str, bool]:
    """(dotted module name, whether it is a package's __init__) of a file under `root`, the
    package directory."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str, list[str]]]:
    """(line, imported module, names imported from it) for every import anywhere in `tree`."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target, [a.name for a in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value, []


def violations(root: Path) -> list[str]:
    """One line per import that points up (or into a module no layer declares), as
    `path:line: module (layer) imports target (layer)`, for the package directory `root`."""
    found = []
    modules = {module_name(p, root)[0] for p in root.rglob("*.py")}
    for path in sorted(root.rglob("*.py")):
        module, is_package = module_name(path, root)
        where = path.relative_to(root.parent)
        if module == PACKAGE:
            continue
        own = layer_of(module)
        if own is None:
            found.append(f"{where}:1: {module} is in no layer; declare it in LAYERS")
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, target, names in imports(tree, module, is_package):
            if target != PACKAGE and not target.startswith(PACKAGE + "."):
                continue
            # `from pkg import sub` imports the submodule pkg.sub when there is one.
            targets = [f"{target}.{n}" if f"{target}.{n}" in modules else target for n in names]
            for t in dict.fromkeys(targets or [target]):  # once per module and line
                if t == PACKAGE:
                    extra = sorted(set(names) - ROOT_OWN_NAMES)
                    if extra:
                        found.append(
                            f"{where}:{line}: {module} imports {', '.join(extra)} from the "
                            f"package root; import from the module that defines it"
                        )
                    continue
                theirs = layer_of(t)
                if theirs is None or theirs > own:
                    layer = "no layer" if theirs is None else LAYERS[theirs][0]
                    found.append(
                        f"{where}:{line}: {module} ({LAYERS[own][0]}) imports {t} ({layer})"
                    )
    return found


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """For every module under the package directory `root`: the modules of the package it
    imports (as `violations` reads them; `from pkg import sub` imports the submodule), each with
    the first line that imports it."""
    paths = {module_name(p, root)[0]: p for p in root.rglob("*.py")}
    graph: dict[str, dict[str, int]] = {}
    for module, path in sorted(paths.items()):
        edges = graph.setdefault(module, {})
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, target, names in imports(tree, module, module_name(path, root)[1]):
            targets = [f"{target}.{n}" if f"{target}.{n}" in paths else target for n in names]
            for t in targets or [target]:
                if t in paths and t != module:
                    edges[t] = min(line, edges.get(t, line))
    return graph


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _shortest_cycle(graph: dict[str, dict[str, int]], start: str, members: set[str]) -> list[str]:
    """The shortest chain of imports from `start` back to it through `members` (breadth
    first), as [start, ..., start]."""
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph[v]):
            if w == start:
                chain = [v]
                while chain[-1] != start:
                    chain.append(previous[chain[-1]])
                return [*reversed(chain), start]
            if w in members and w not in previous:
                previous[w] = v
                queue.append(w)
    raise AssertionError(f"{start} is in no cycle")  # a component has one through each member


def _file_of(module: str, root: Path) -> str:
    """`module`'s file relative to the folder holding the package, as `violations` names it."""
    path = root.parent.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return path.relative_to(root.parent).as_posix()


def cycles(root: Path) -> list[str]:
    """One line per set of modules that import each other, for the package directory `root`:
    the shortest cycle through its first module, each step with the file and line of its
    import, as `import cycle: a (a.py:3) -> b (b.py:7) -> a`."""
    graph = import_graph(root)
    found = []
    for component in _strongly_connected(graph):
        loop = _shortest_cycle(graph, component[0], set(component))
        steps = " -> ".join(f"{a} ({_file_of(a, root)}:{graph[a][b]})" for a, b in pairwise(loop))
        line = f"import cycle: {steps} -> {loop[0]}"
        if len(component) > len(loop) - 1:
            line += f" (modules that import each other: {', '.join(component)})"
        found.append(line)
    return found


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = violations(SRC)
    assert not found, "imports that point up:\n" + "\n".join(found)


def test_no_modules_import_each_other() -> None:
    found = cycles(SRC)
    assert not found, "import cycles:\n" + "\n".join(found)


def test_every_module_is_checked() -> None:
    # The checker sees the whole package, apps and the Flower engine included.
    seen = {module_name(p, SRC)[0] for p in SRC.rglob("*.py")}
    for module in (
        "cosmosfl.core.seeds",
        "cosmosfl.engines.flower.federation",
        "cosmosfl.apps.flower.server_app",
        "cosmosfl.experiment.result",
        "cosmosfl.reporting.report",
        "cosmosfl.cli.main",
    ):
        assert module in seen and layer_of(module) is not None


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / PACKAGE


def test_the_checker_catches_planted_violations(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "cosmosfl/__init__.py": "from cosmosfl.cli import main\n",  # the facade: free
            "cosmosfl/core/__init__.py": "",
            "cosmosfl/core/ok.py": "import numpy\nfrom . import seeds\n",
            "cosmosfl/core/seeds.py": (
                "from cosmosfl import __version__\n"
                "\n"
                "def late():\n"
                "    from cosmosfl.experiment.runner import run  # function-level\n"
            ),
            "cosmosfl/engines/__init__.py": "",
            "cosmosfl/engines/sim.py": (
                "from ..core import seeds\n"
                "from ..experiment import result\n"  # relative, upward
                "from cosmosfl import simulate\n"  # a facade name, not the root's own
            ),
            "cosmosfl/experiment/__init__.py": "",
            "cosmosfl/experiment/result.py": "from cosmosfl.engines.sim import x\n",
            "cosmosfl/experiment/runner.py": (
                "import importlib\nimportlib.import_module('cosmosfl.cli.main')\n"
            ),
            "cosmosfl/cli/__init__.py": "",
            "cosmosfl/cli/main.py": "from cosmosfl.experiment import runner\n",
            "cosmosfl/stray.py": "",
        },
    )
    assert violations(pkg) == [
        "cosmosfl/core/seeds.py:4: cosmosfl.core.seeds (core) imports "
        "cosmosfl.experiment.runner (experiment)",
        "cosmosfl/engines/sim.py:2: cosmosfl.engines.sim (engines) imports "
        "cosmosfl.experiment.result (experiment)",
        "cosmosfl/engines/sim.py:3: cosmosfl.engines.sim imports simulate from the package "
        "root; import from the module that defines it",
        "cosmosfl/experiment/runner.py:2: cosmosfl.experiment.runner (experiment) imports "
        "cosmosfl.cli.main (cli)",
        "cosmosfl/stray.py:1: cosmosfl.stray is in no layer; declare it in LAYERS",
    ]


def test_the_checker_catches_planted_cycles(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "cosmosfl/__init__.py": "",
            # Two modules of one layer; the way back is deferred into a function, relative.
            "cosmosfl/core/__init__.py": "",
            "cosmosfl/core/a.py": "from cosmosfl.core import b\n",  # the submodule b
            "cosmosfl/core/b.py": "def late():\n    from . import a\n",
            # Three, closed by a TYPE_CHECKING import and an importlib call.
            "cosmosfl/client/__init__.py": "from cosmosfl.client.c import C\n",  # not a cycle
            "cosmosfl/client/c.py": (
                "from typing import TYPE_CHECKING\n"
                "\n"
                "if TYPE_CHECKING:\n"
                "    from cosmosfl.client.e import E\n"
            ),
            "cosmosfl/client/d.py": "import cosmosfl.client.c\n",
            "cosmosfl/client/e.py": (
                "import importlib\nimportlib.import_module('cosmosfl.client.d')\n"
            ),
            # Imports that go one way only, the package root's own name included.
            "cosmosfl/data/__init__.py": "from cosmosfl.data.f import F\n",
            "cosmosfl/data/f.py": "import numpy\nfrom cosmosfl.data import g\n",
            "cosmosfl/data/g.py": "from cosmosfl import __version__\n",
        },
    )
    assert cycles(pkg) == [
        "import cycle: cosmosfl.client.c (cosmosfl/client/c.py:4) -> cosmosfl.client.e "
        "(cosmosfl/client/e.py:2) -> cosmosfl.client.d (cosmosfl/client/d.py:1) -> "
        "cosmosfl.client.c",
        "import cycle: cosmosfl.core.a (cosmosfl/core/a.py:1) -> cosmosfl.core.b "
        "(cosmosfl/core/b.py:2) -> cosmosfl.core.a",
    ]
    # One more module in a cycle is named beside the shortest cycle through the first.
    (pkg / "core" / "z.py").write_text("from cosmosfl.core import b\n")
    (pkg / "core" / "b.py").write_text("def late():\n    from . import a, z\n")
    assert cycles(pkg)[1].endswith(
        "-> cosmosfl.core.a (modules that import each other: cosmosfl.core.a, cosmosfl.core.b, "
        "cosmosfl.core.z)"
    )


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("cosmosfl.engines.flower.codec", "engines"),
        ("cosmosfl.apps.flower.client_app", "apps"),
        ("cosmosfl.client", "client"),
        ("cosmosfl.clientele", None),  # a prefix match is by whole names only
        ("cosmosfl.reporting.plots", "reporting"),
        ("cosmosfl.privacy.audit", "experiment"),  # the longest prefix wins
        ("cosmosfl.experiment.reporter", "experiment"),
    ],
)
def test_layer_of(module: str, layer: str | None) -> None:
    index = layer_of(module)
    assert (None if index is None else LAYERS[index][0]) == layer
