"""Every import points down: no module of cosmosfl imports a layer above its own.

The layers, lowest first, are declared once in `LAYERS` (docs/architecture.md gives the rule of
each). Every module under src/cosmosfl is parsed with `ast`: module-level, function-level and
`if TYPE_CHECKING:` imports, relative ones resolved against the importing package, and
`importlib.import_module("...")` calls with a literal name. Imports within one layer are free.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = "cosmosfl"
SRC = Path(__file__).resolve().parents[1] / "src" / PACKAGE

# Lowest first. A module belongs to the layer of its longest matching prefix.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("cosmosfl.core",)),
    ("data, models", ("cosmosfl.data", "cosmosfl.models")),
    ("learners", ("cosmosfl.learners",)),
    ("algorithms", ("cosmosfl.algorithms",)),
    ("client", ("cosmosfl.client", "cosmosfl.handlers")),
    ("engines", ("cosmosfl.engines",)),
    ("experiment", ("cosmosfl.experiment", "cosmosfl.presets")),
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


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = violations(SRC)
    assert not found, "imports that point up:\n" + "\n".join(found)


def test_every_module_is_checked() -> None:
    # The checker sees the whole package, apps and the Flower engine included.
    seen = {module_name(p, SRC)[0] for p in SRC.rglob("*.py")}
    for module in (
        "cosmosfl.core.seeds",
        "cosmosfl.engines.flower.federation",
        "cosmosfl.apps.flower.server_app",
        "cosmosfl.experiment.result",
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


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("cosmosfl.engines.flower.codec", "engines"),
        ("cosmosfl.apps.flower.client_app", "apps"),
        ("cosmosfl.client", "client"),
        ("cosmosfl.clientele", None),  # a prefix match is by whole names only
    ],
)
def test_layer_of(module: str, layer: str | None) -> None:
    index = layer_of(module)
    assert (None if index is None else LAYERS[index][0]) == layer
