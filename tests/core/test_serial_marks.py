"""Every test that measures time or rate is marked `serial`, so that it runs alone (`make test` runs those after
the others): beside four other workers its counts and durations measure the machine's load, not einmal.

A value is taken from the clock when it comes from `time.monotonic()`, `time.perf_counter()`, `time.time()`,
a message's arrival time (`.at`, or a name `at`), or what a function that reads the clock returns (its own
module's, or one of tests/), directly or through the names it was assigned to; it is a count when it is a
`sum(…)` or `len(…)` of such values. A test measures time when one of its asserts (or one of its module's
helpers it calls) bounds such a value as load would break it: a time from above (`took < 5`), a count from
below (`quiet >= 30`), or one count against another (`flooded >= 0.7 * quiet`). A lower bound on a time ("not
before") holds however slow the machine is, and a clock read that is only a time-out (`anyio.fail_after`, a
polling loop's deadline) is no assert: neither is counted."""

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
CLOCKS = {"monotonic", "perf_counter", "time"}  # time.monotonic(), time.perf_counter(), time.time()
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _reads_clock(node: ast.AST, clocky: set[str]) -> bool:
    """Whether the expression reads the clock: a clock call, a `.at` arrival time or a call of a clocky function."""
    for sub in ast.walk(node):
        if (isinstance(sub, ast.Attribute) and sub.attr == "at") or (isinstance(sub, ast.Name) and sub.id == "at"):
            return True
        if isinstance(sub, ast.Call):
            func = sub.func
            if isinstance(func, ast.Attribute) and func.attr in CLOCKS and isinstance(func.value, ast.Name):
                if func.value.id in {"time", "loop"}:
                    return True
            if isinstance(func, ast.Name) and (func.id in clocky or func.id in {"monotonic", "perf_counter"}):
                return True
    return False


def _names(node: ast.AST) -> set[str]:
    return {sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name)}


class Taint:
    """The names of one function whose values come from the clock, and which of them are counts."""

    def __init__(self, function: Function, clocky: set[str], counting: set[str]) -> None:
        self.clocky, self.counting = clocky, counting
        self.timed: set[str] = set()
        self.counts: set[str] = set()
        while True:
            before = len(self.timed), len(self.counts)
            for node in ast.walk(function):
                for target, value in _assignments(node):
                    if self.timed_value(value):
                        self.timed |= _names(target)
                        if self.count_value(value):
                            self.counts |= _names(target)
            if (len(self.timed), len(self.counts)) == before:
                break

    def timed_value(self, node: ast.AST) -> bool:
        return _reads_clock(node, self.clocky) or bool(_names(node) & self.timed)

    def count_value(self, node: ast.AST) -> bool:
        while isinstance(node, ast.Await):
            node = node.value
        if isinstance(node, ast.Name):
            return node.id in self.counts
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in {"sum", "len"}:
                return any(self.timed_value(arg) for arg in node.args)
            return node.func.id in self.counting
        return False

    def breaks_under_load(self, compare: ast.Compare) -> bool:
        """A time bounded from above, a count from below, or one count against another (two times ordered bound
        their difference from below: "not before")."""
        operands = [compare.left, *compare.comparators]
        for op, left, right in zip(compare.ops, operands, operands[1:], strict=False):
            if not isinstance(op, ORDERING):
                continue
            small, big = (left, right) if isinstance(op, ast.Lt | ast.LtE) else (right, left)
            timed_small, timed_big = self.timed_value(small), self.timed_value(big)
            counts = self.count_value(small) or self.count_value(big)
            if timed_small and timed_big:  # two times bound their difference from below: only counts measure
                if counts:
                    return True
            elif (timed_small and not self.count_value(small)) or (timed_big and self.count_value(big)):
                return True
        return False


def _assignments(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) of an assignment, a loop or a comprehension; a list's `append` is one too."""
    if isinstance(node, ast.Assign):
        return [(target, node.value) for target in node.targets]
    if isinstance(node, ast.AugAssign | ast.AnnAssign) and node.value is not None:
        return [(node.target, node.value)]
    if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        return [(node.target, node.iter)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append":
        return [(node.func.value, arg) for arg in node.args]
    return []


def _measures(function: Function, clocky: set[str], counting: set[str]) -> bool:
    """Whether one of the function's own asserts bounds a measure as load would break it."""
    taint = Taint(function, clocky, counting)
    return any(
        isinstance(compare, ast.Compare) and taint.breaks_under_load(compare)
        for node in ast.walk(function)
        if isinstance(node, ast.Assert)
        for compare in ast.walk(node.test)
    )


def _functions(tree: ast.Module) -> dict[str, Function]:
    return {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def _clocky(functions: dict[str, Function], known: tuple[set[str], set[str]]) -> tuple[set[str], set[str]]:
    """The functions that return a value read from the clock, and those of them that return a count, to a fixed
    point."""
    clocky, counting = set(known[0]), set(known[1])
    while True:
        before = len(clocky), len(counting)
        for name, function in functions.items():
            taint = Taint(function, clocky, counting)
            returns = [node.value for node in ast.walk(function) if isinstance(node, ast.Return) and node.value]
            if any(taint.timed_value(value) for value in returns):
                clocky.add(name)
                if any(taint.count_value(value) for value in returns):
                    counting.add(name)
        if (len(clocky), len(counting)) == before:
            return clocky, counting


def _calls(function: Function) -> set[str]:
    return {
        node.func.id for node in ast.walk(function) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }


def _serial(node: ast.AST) -> bool:
    return any("serial" in ast.unparse(decorator) for decorator in getattr(node, "decorator_list", []))


def _module_serial(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        and "serial" in ast.unparse(node.value)
        for node in tree.body
    )


def _support_clocky() -> tuple[set[str], set[str]]:
    """The functions of every module under tests/ that return a value read from the clock."""
    functions: dict[str, Function] = {}
    for path in sorted(TESTS.rglob("*.py")):
        functions.update(_functions(ast.parse(path.read_text())))
    return _clocky(functions, (set(), set()))


def measuring_unmarked(tree: ast.Module, imported: tuple[set[str], set[str]]) -> list[str]:
    """The test functions of one module that measure time (themselves or through a helper of the module they
    call) without the `serial` mark."""
    if _module_serial(tree):
        return []
    functions = _functions(tree)
    clocky, counting = _clocky(functions, imported)
    measuring = {name for name, function in functions.items() if _measures(function, clocky, counting)}
    while True:  # a helper that asserts on the clock makes its callers measuring
        more = {name for name, function in functions.items() if name not in measuring and _calls(function) & measuring}
        if not more:
            break
        measuring |= more
    return sorted(
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test")
        and node.name in measuring
        and not _serial(node)
    )


def test_every_test_that_measures_time_or_rate_is_serial() -> None:
    imported = _support_clocky()
    unmarked = [
        f"{path.relative_to(TESTS.parent)}::{name}"
        for path in sorted(TESTS.rglob("test_*.py"))
        for name in measuring_unmarked(ast.parse(path.read_text()), imported)
    ]
    assert not unmarked, "these measure time or rate but are not @pytest.mark.serial:\n" + "\n".join(unmarked)


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        (  # a count in a window, through a helper that reads arrival times
            "def within(server, start, end):\n    return sum(start <= m.at < end for m in server.messages)\n"
            "def test_pace(server):\n    quiet = within(server, 0, 1)\n    assert quiet >= 10\n",
            ["test_pace"],
        ),
        (  # an elapsed time, through an assignment
            "import time\ndef test_fast():\n    began = time.monotonic()\n    work()\n"
            "    took = time.monotonic() - began\n    assert took < 1.0\n",
            ["test_fast"],
        ),
        (  # a helper's assert counts for its caller
            "import time\ndef check():\n    began = time.perf_counter()\n    assert time.perf_counter() - began < 2\n"
            "def test_calls_it():\n    check()\n",
            ["test_calls_it"],
        ),
        (  # marked: fine
            "import time, pytest\n@pytest.mark.serial\ndef test_fast():\n"
            "    began = time.monotonic()\n    assert time.monotonic() - began < 1.0\n",
            [],
        ),
        (  # a time bounded from below ("not before") and a count from above hold on a slow machine too
            "import time\ndef test_not_early(server):\n    began = time.monotonic()\n    run()\n"
            "    assert server.messages[0].at >= began + 2\n    assert len(server.messages) <= 10\n",
            [],
        ),
        (  # a deadline in a polling loop, and an equality: not measures
            "import time\ndef test_polls():\n    deadline = time.monotonic() + 5\n"
            "    while time.monotonic() < deadline:\n        pass\n    assert count() == 3\n",
            [],
        ),
    ],
)
def test_the_scan_tells_measuring_tests(source: str, flagged: list[str]) -> None:
    assert measuring_unmarked(ast.parse(source), (set(), set())) == flagged
