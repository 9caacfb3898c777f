"""A node's actors say what they share (docs/design.md#wires): no actor is handed the whole `Settings` or the
node's wiring, only its own section of the settings and the wires it uses; each wire names its writer and its
readers."""

import ast
import dataclasses
import inspect

from actors import wires
from tests.conftest import ROOT

# the modules that put the node together or build the sections from Settings: no actor among them
ASSEMBLY = {"node.py", "wiring.py", "sections.py"}


def parameters(tree: ast.Module) -> list[tuple[str, int, str, str]]:
    """(function, line, parameter, annotation) of every function and method of a module, `of` (a section's
    constructor from Settings) aside."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name != "of":
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                if arg.annotation is not None:
                    found.append((node.name, node.lineno, arg.arg, ast.unparse(arg.annotation)))
    return found


def test_no_actor_takes_the_whole_settings_or_the_node_wiring() -> None:
    handed = [
        f"actors/{path.name}:{line} {function}({name}: {annotation})"
        for path in sorted((ROOT / "actors").glob("*.py"))
        if path.name not in ASSEMBLY
        for function, line, name, annotation in parameters(ast.parse(path.read_text()))
        if annotation.split(" | ")[0] in ("Settings", "NodeWiring")
    ]
    assert handed == []


def test_only_the_node_holds_its_wiring() -> None:
    importers = [
        path.name
        for path in sorted((ROOT / "actors").glob("*.py"))
        if "actors.wiring" in path.read_text() and path.name not in ASSEMBLY
    ]
    assert importers == []


def test_each_wire_names_its_writer_and_its_readers() -> None:
    classes = [
        c
        for _, c in inspect.getmembers(wires, inspect.isclass)
        if c.__module__ == wires.__name__ and c is not wires.Nudge
    ]
    assert len(classes) >= 9
    unnamed = [
        c.__name__
        for c in classes
        if not (
            ("written by" in (doc := " ".join((c.__doc__ or "").lower().split())) or "set by" in doc)
            and ("read by" in doc or "waited on by" in doc or "taken by" in doc)
        )
    ]
    assert unnamed == []
    # every wire is in the module's table of writers and readers
    assert [c.__name__ for c in classes if f"`{c.__name__}`" not in (wires.__doc__ or "")] == []
    assert all(dataclasses.is_dataclass(c) or c in (wires.Fencing, wires.Journal) for c in classes)
