"""Imports run one way (docs/design.md#layout): entry points → actors → subjects → core.

Every import of service/ and actors/, at any depth of a module (a function's late import
counts too), goes to the importer's own layer or one below; the subject packages import
each other without a circle; and no module of service/, actors/ or bench/ imports itself
round a circle.
"""

import ast
from graphlib import CycleError, TopologicalSorter

from tests.conftest import ROOT

ENTRY = ("service.cli", "service.web", "service.api", "service.node", "service.__main__")
SUBJECTS = ("service.mail", "service.smtp", "service.inbound", "service.subscribers")
LAYERS = {"entry points": 3, "actors": 2, "subjects": 1, "core": 0}


def under(module: str, prefixes: tuple[str, ...]) -> str | None:
    return next((p for p in prefixes if module == p or module.startswith(p + ".")), None)


def layer(module: str) -> str:
    if under(module, ("actors",)):
        return "actors"
    return "entry points" if under(module, ENTRY) else "subjects" if under(module, SUBJECTS) else "core"


def imports(*folders: str) -> dict[str, set[str]]:
    """Each module of the folders and the modules of the folders it imports."""
    paths = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for folder in folders
        for p in ROOT.glob(f"{folder}/**/*.py")
    }
    found = {}
    for module, path in paths.items():
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names |= {
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths else node.module for a in node.names
                }
        found[module] = {n for n in names if n in paths and n != module}
    return found


def circle(graph: dict[str, set[str]]) -> str | None:
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return " → ".join(reversed(exc.args[1]))
    return None


def test_no_module_imports_from_a_layer_above_it() -> None:
    upward = sorted(
        f"{module} ({layer(module)}) imports {name} ({layer(name)})"
        for module, names in imports("service", "actors").items()
        for name in names
        if LAYERS[layer(name)] > LAYERS[layer(module)]
    )
    assert upward == [], "\n".join(upward)


def test_the_subject_packages_import_each_other_without_a_circle() -> None:
    graph: dict[str, set[str]] = {p: set() for p in SUBJECTS}
    for module, names in imports("service").items():
        if (source := under(module, SUBJECTS)) is not None:
            graph[source] |= {p for name in names if (p := under(name, SUBJECTS)) not in (None, source)}
    assert (found := circle(graph)) is None, found


def test_no_module_imports_itself_round_a_circle() -> None:
    assert (found := circle(imports("service", "actors", "bench"))) is None, found
