"""Imports run one way (docs/design.md#layout): entry points → actors → subjects → core.

Every import of service/ and actors/, at any depth of a module (a function's late import
counts too), goes to the importer's own layer or one below; the entry points service.cli, service.console,
service.api and service.web are islands: none imports another (what two of them share is a
subject's, such as service.campaigns and service.accounts); the subject packages import
each other without a circle; and no module of service/, actors/ or bench/ imports itself
round a circle. The command line and the API run no query of their own: a route or a command
parses, calls a subject's function and prints or serializes its answer (no `db.sql(` in them,
but for the API's Idempotency-Key claim, the infrastructure of its surface).
"""

import ast
from graphlib import CycleError, TopologicalSorter

from tests.conftest import ROOT

# actors.node is the process's entry point: it puts the actors, the HTTP surface and the API together
ENTRY = ("service.cli", "service.web", "service.api", "service.console", "actors.node", "service.__main__")
CORE = ("service.db",)  # the core's package: the database, its migrations, the embedded server
# the subject packages: every package of service/ but the entry points and the core's
SUBJECTS = tuple(
    f"service.{p.name}"
    for p in sorted((ROOT / "service").iterdir())
    if (p / "__init__.py").exists() and f"service.{p.name}" not in (*ENTRY, *CORE)
)
ISLANDS = (
    "service.cli",
    "service.api",
    "service.web",
    "service.console",
)  # entry points that import none of the others
LAYERS = {"entry points": 3, "actors": 2, "subjects": 1, "core": 0}


def under(module: str, prefixes: tuple[str, ...]) -> str | None:
    return next((p for p in prefixes if module == p or module.startswith(p + ".")), None)


def layer(module: str) -> str:
    if under(module, ENTRY):
        return "entry points"
    return "actors" if under(module, ("actors",)) else "subjects" if under(module, SUBJECTS) else "core"


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


def crossings(graph: dict[str, set[str]]) -> list[str]:
    """Each import of one island's module from another island."""
    return sorted(
        f"{module} imports {name}"
        for module, names in graph.items()
        if (source := under(module, ISLANDS)) is not None
        for name in names
        if under(name, ISLANDS) not in (None, source)
    )


def test_the_command_line_the_api_and_the_web_surface_import_none_of_each_other() -> None:
    assert (found := crossings(imports("service", "actors"))) == [], "\n".join(found)


def test_an_import_across_islands_is_found_and_one_within_or_below_is_not() -> None:
    graph = {
        "service.api.campaigns": {"service.cli.campaigns", "service.api.deps", "service.campaigns.rows"},
        "service.web.app": {"service.api.app"},
        "service.cli.campaigns": {"service.cli.tables", "service.campaigns.drafts"},
        "actors.node": {"service.web.app", "service.api.app"},  # the node puts them together: no island
    }
    assert crossings(graph) == [
        "service.api.campaigns imports service.cli.campaigns",
        "service.web.app imports service.api.app",
    ]


def test_the_subject_packages_import_each_other_without_a_circle() -> None:
    graph: dict[str, set[str]] = {p: set() for p in SUBJECTS}
    for module, names in imports("service").items():
        if (source := under(module, SUBJECTS)) is not None:
            graph[source] |= {p for name in names if (p := under(name, SUBJECTS)) not in (None, source)}
    assert (found := circle(graph)) is None, found


def test_no_module_imports_itself_round_a_circle() -> None:
    assert (found := circle(imports("service", "actors", "bench"))) is None, found


QUERYING = ("service/api", "service/cli", "service/console")  # entry points whose modules name no query
MAY_QUERY = {"service/api/idempotency.py"}  # the Idempotency-Key claim: the API surface's own machinery


def queries(source: str) -> list[int]:
    """The lines of the source that call `db.sql(…)`, or `sql(…)` imported from service.db."""
    tree = ast.parse(source)
    bare = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "service.db"
        for a in node.names
        if a.name == "sql"
    }
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == "sql" and ast.unparse(node.func.value) == "db")
            or (isinstance(node.func, ast.Name) and node.func.id in bare)
        )
    )


def test_the_command_line_and_the_api_run_no_query_of_their_own() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in QUERYING
        for path in sorted(ROOT.glob(f"{folder}/**/*.py"))
        if str(path.relative_to(ROOT)) not in MAY_QUERY
        for line in queries(path.read_text())
    ]
    assert found == [], "a subject's function should run these queries:\n" + "\n".join(found)


def test_a_query_called_in_a_module_is_found_and_a_subject_function_is_not() -> None:
    source = (
        "from service import db\nfrom service.db import sql as q\n"
        "async def f(conn):\n"
        "    await conn.fetch(*db.sql('a', x=1))\n"
        "    await conn.fetch(*q('b'))\n"
        "    await lists.lists(conn, account_id=1)\n"
        "    db.query('c')\n"
    )
    assert queries(source) == [4, 5]
