"""Imports run one way (docs/design.md §14): entry points → actors → subjects → core.

Every import of service/ and actors/, at any depth of a module (a function's late import
counts too), goes to the importer's own layer or one below; and no two subject packages
import each other, directly or round a longer circle.
"""

import ast
from graphlib import CycleError, TopologicalSorter

from tests.conftest import ROOT

ENTRY = ("service.cli", "service.web", "service.node", "service.__main__")
SUBJECTS = ("service.mail", "service.smtp", "service.inbound", "service.subscribers")
LAYERS = {"entry points": 3, "actors": 2, "subjects": 1, "core": 0}


def layer(module: str) -> str:
    if module == "actors" or module.startswith("actors."):
        return "actors"
    for name, prefixes in (("entry points", ENTRY), ("subjects", SUBJECTS)):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return name
    return "core"


def imports() -> dict[str, set[str]]:
    """Each module of service/ and actors/ and the einmal modules it imports."""
    found = {}
    for path in sorted([*ROOT.glob("service/**/*.py"), *ROOT.glob("actors/**/*.py")]):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        found[module] = {n for n in names if n.split(".")[0] in ("service", "actors")}
    return found


def test_no_module_imports_from_a_layer_above_it() -> None:
    upward = sorted(f"{module} ({layer(module)}) imports {name} ({layer(name)})"
                    for module, names in imports().items() for name in names
                    if LAYERS[layer(name)] > LAYERS[layer(module)])
    assert upward == [], "\n".join(upward)


def test_the_subject_packages_import_each_other_without_a_circle() -> None:
    def package(module: str) -> str | None:
        return next((p for p in SUBJECTS if module == p or module.startswith(p + ".")), None)

    graph: dict[str, set[str]] = {p: set() for p in SUBJECTS}
    for module, names in imports().items():
        if (source := package(module)) is not None:
            graph[source] |= {p for name in names if (p := package(name)) not in (None, source)}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        raise AssertionError(f"subject packages in a circle: {' → '.join(exc.args[1])}") from None
