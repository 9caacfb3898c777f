"""The sandbox campaign templates run in: Jinja2's immutable sandbox, and a budget for each message.

The operator writes the template, the subscribers bring the data; neither may make one message
cost more than a bounded time and memory (docs/design.md#templates). Each template of a message (subject,
text body, HTML body) has MAX_STEPS steps, counted, not timed, so every node fails the same message
the same way. A step is:

- a loop item (``{% for %}``, a recursive ``loop()``), a call (a method, ``range``…; a macro or
  ``caller()`` is MACRO_STEPS), a filter, a test, an operator, a comparison, a slice, a ``~`` or
  an output;
- and, for each of these but a loop item, every item of a list, tuple or mapping and every
  CHARS_PER_STEP characters of a string it is given or makes (a macro: what it makes), nested
  ones included. The lazy filters (``map``, ``select``…) count each item as it is taken.

What can make far more than it is given is checked before it runs, against MAX_OUTPUT characters
(or items) for one value and MAX_INT_BITS for a number: ``*``, ``**``, ``+``, ``~``, ``%`` formatting
(its widths and precisions), the ``replace``, ``join`` and ``urlize`` filters, the ``replace`` and
``join`` methods; ``range()`` gives at most MAX_STEPS items. The str methods that pad or expand
(``center``, ``ljust``, ``rjust``, ``zfill``, ``expandtabs``, ``translate``, ``format``…) and
``tojson``'s ``indent`` are refused. Going past any of it raises BudgetError, a SecurityError.

What costs far more than a copy per character is counted for it: the filters and str methods in
_CHARS_PER_STEP spend a step for so many characters they are given (``title`` one a character), those in
_STEPS_PER_ITEM steps for each item (a string's characters: ``sort``, ``unique``…). So MAX_STEPS of any form
take about 0.1 s, and a hostile template is refused in milliseconds, the same way on every node and every time.
The budget is kept per thread (_Meter): renders in worker threads at once never spend each other's. The last
guard is MAX_SECONDS of the thread's CPU time (TooSlow), for what the steps would count wrong.

Jinja's sandbox has no hook for loops, comparisons, slices, ``~`` and outputs: the code generator
(``Environment.code_generator_class``) writes a call to the budget around each. Plain fields
(``{{ name }}``) never get here: templates.py fills them with str.format.
"""

import functools
import math
import re
import threading
import time
from collections.abc import Collection, Mapping
from typing import AnyStr

from jinja2 import StrictUndefined
from jinja2.compiler import CodeGenerator, operators, optimizeconst
from jinja2.nodes import Const, Slice
from jinja2.runtime import LoopContext, Macro, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

MAX_STEPS = 100_000  # steps for one template of one message
CHARS_PER_STEP = 100  # characters of a string handled in one step
MAX_OUTPUT = 1_000_000  # characters (or items) of one value, and of one template's output
MAX_INT_BITS = 4096  # bits of a number an operator may make
MACRO_STEPS = 10  # a macro call costs about as much as ten loop items
MAX_SECONDS = 3.0  # the last guard: one template of one message using more CPU time (its thread's) fails

FILTERS = frozenset(
    (
        "abs",
        "attr",
        "capitalize",
        "count",
        "d",
        "default",
        "dictsort",
        "e",
        "escape",
        "filesizeformat",
        "first",
        "float",
        "forceescape",
        "groupby",
        "int",
        "items",
        "join",
        "last",
        "length",
        "list",
        "lower",
        "map",
        "max",
        "min",
        "reject",
        "rejectattr",
        "replace",
        "reverse",
        "round",
        "safe",
        "select",
        "selectattr",
        "sort",
        "string",
        "striptags",
        "sum",
        "title",
        "tojson",
        "trim",
        "truncate",
        "unique",
        "upper",
        "urlencode",
        "urlize",
        "wordcount",
        "xmlattr",
    )
)
# filters and tests that take constant time; and the lazy filters, which count each item as it is taken
_CONSTANT_FILTERS = frozenset(("abs", "attr", "d", "default", "first", "last", "length", "count"))
_LAZY = frozenset(("map", "select", "reject", "selectattr", "rejectattr", "items"))
_CONSTANT_TESTS = frozenset(
    (
        "defined",
        "undefined",
        "none",
        "boolean",
        "false",
        "true",
        "integer",
        "float",
        "number",
        "string",
        "mapping",
        "iterable",
        "sequence",
        "callable",
        "sameas",
        "escaped",
        "odd",
        "even",
        "divisibleby",
        "filter",
        "test",
    )
)
_EXPANDING = frozenset(
    ("center", "ljust", "rjust", "zfill", "expandtabs", "translate", "maketrans", "format", "format_map", "to_bytes")
)
# what costs far more per character than a copy does: characters of the string given for each step (the
# filter, or the str method of that name); measured on a million characters, so that MAX_STEPS of any of
# them take about as long as MAX_STEPS loop items (docs/design.md#templates)
_CHARS_PER_STEP = {
    "title": 1,  # Jinja's filter splits on word beginnings in Python: 0.5 us a character
    "wordcount": 3,
    "urlize": 3,
    "urlencode": 8,
    "striptags": 10,
    "capitalize": 20,
    "swapcase": 10,
    "split": 20,
    "rsplit": 20,
}
# the filters that go through the items of what they are given (a string's characters): steps for each item
_STEPS_PER_ITEM = {
    "sort": 4,
    "dictsort": 4,
    "groupby": 4,
    "unique": 2,
    "list": 1,
    "join": 1,
    "reverse": 1,
    "min": 1,
    "max": 1,
    "sum": 1,
}
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d*)(?:\.(\*|\d*))?")


class BudgetError(SecurityError):
    """One template would take more than its budget for this message."""


class TooSlow(BudgetError):
    """One template used more than MAX_SECONDS of its thread's CPU time: the last guard, for what the steps
    would count wrong; on time, so not quite the same on every node (a slow CPU, a profiler)."""


class _Meter(threading.local):
    """The budget of the message being rendered in this thread: each thread renders one at a time, and
    a render in another thread (a worker's, the claimer's check) never spends from it."""

    budget = MAX_STEPS
    deadline = math.inf


def _exhausted() -> BudgetError:
    return BudgetError(
        f"more than {MAX_STEPS:,} steps for one message (each loop item, call, filter, "
        f"operator and output is one, and each {CHARS_PER_STEP} characters or item it handles)"
    )


def _too_big(what: str, size: int, limit: int = MAX_OUTPUT, unit: str = "characters") -> None:
    if size > limit:
        raise BudgetError(f"{what} of more than {limit:,} {unit}")


def weight(value, limit: int) -> int:
    """The steps it takes to handle ``value``: a step, and one for each item and each CHARS_PER_STEP
    characters in it, nested values included; the count stops soon after passing ``limit``."""
    cls = value.__class__
    if cls is str:
        return 1 + len(value) // CHARS_PER_STEP
    if cls is int:
        return 1 + value.bit_length() // 64
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str | bytes):
            total += 1 + len(item) // CHARS_PER_STEP
        elif isinstance(item, int):
            total += 1 + item.bit_length() // 64
        elif isinstance(item, Undefined | range) or not isinstance(item, Collection):
            total += 1  # a range, a generator: what consumes it counts its items
        else:
            total += 1 + len(item)
            if total <= limit:
                stack.extend(item.values() if isinstance(item, Mapping) else item)
                if isinstance(item, Mapping):
                    stack.extend(item.keys())
    return total


def _costly(value, per_char: int | None, per_item: int | None) -> int:
    """The steps, beyond its weight, of a filter that costs more than a copy of what it is given."""
    if isinstance(value, str | bytes):
        return len(value) * per_item if per_item else len(value) // (per_char or CHARS_PER_STEP)
    if per_item and isinstance(value, Collection):
        return len(value) * per_item
    return 0


def _replaced(text: AnyStr, old: AnyStr, new: AnyStr, count=None) -> None:
    """Refuse a replace whose result would pass MAX_OUTPUT, before it is made."""
    times = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        times = min(times, count)
    _too_big("a replace", len(text) + times * (len(new) - len(old)))


class _CodeGenerator(CodeGenerator):
    """Jinja's compiler with the budget written around loops, comparisons, slices, ``~`` and outputs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._loops: set[int] = set()  # the iterables of the loops being written (Jinja has no custom nodes)

    def visit_For(self, node, frame) -> None:
        self._loops.add(id(node.iter))
        super().visit_For(node, frame)

    def visit(self, node, *args, **kwargs):
        if id(node) not in self._loops:
            return super().visit(node, *args, **kwargs)
        self._loops.discard(id(node))
        self.write("environment.steps(")
        super().visit(node, *args, **kwargs)
        self.write(")")
        return None

    def _spent(self, node, frame) -> None:
        if isinstance(node, Const):
            self.visit(node, frame)
            return
        self.write("environment.spent(")
        self.visit(node, frame)
        self.write(")")

    @optimizeconst
    def visit_Compare(self, node, frame) -> None:
        self.write("(")
        self._spent(node.expr, frame)
        for operand in node.ops:
            self.write(f" {operators[operand.op]} ")
            self._spent(operand.expr, frame)
        self.write(")")

    def visit_Getitem(self, node, frame) -> None:
        if not isinstance(node.arg, Slice):
            return super().visit_Getitem(node, frame)
        self.write("environment.spent(")
        super().visit_Getitem(node, frame)
        self.write(")")

    @optimizeconst
    def visit_Concat(self, node, frame) -> None:
        join = (
            "(markup_join if context.eval_ctx.volatile else str_join)"
            if frame.eval_ctx.volatile
            else "markup_join"
            if frame.eval_ctx.autoescape
            else "str_join"
        )
        self.write(f"environment.joined({join}, (")
        for part in node.nodes:
            self.visit(part, frame)
            self.write(", ")
        self.write("))")

    def visit_Output(self, node, frame) -> None:
        self._buffered = frame.buffer is not None
        super().visit_Output(node, frame)

    def _output_const_repr(self, group) -> str:
        # a macro's text, written in a loop, would be joined by reference: counted like any output
        text = super()._output_const_repr(group)
        return f"environment.spent({text})" if self._buffered else text

    def _output_child_pre(self, node, frame, finalize) -> None:  # the sandbox sets no finalize
        convert = (
            "(escape if context.eval_ctx.autoescape else str)"
            if frame.eval_ctx.volatile
            else "escape"
            if frame.eval_ctx.autoescape
            else "str"
        )
        if self._buffered or frame.eval_ctx.volatile:
            self.write(f"environment.text({convert}, ")
            self._output_end = ")"
            return
        # the template's own output is bounded by templates.run: a str needs no count, only what
        # becomes one (a list holding a long string many times) does
        value = self.temporary_identifier()
        self.write(f"({'' if convert == 'str' else convert}({value}) if ({value} := ")
        self._output_end = f").__class__ is str else environment.text({convert}, {value}))"

    def _output_child_post(self, node, frame, finalize) -> None:
        self.write(self._output_end)


class Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with StrictUndefined, the allowed filters and the budget."""

    code_generator_class = _CodeGenerator
    intercepted_binops = frozenset(("+", "-", "*", "/", "//", "%", "**"))

    def __init__(self, html: bool):
        super().__init__(
            autoescape=html, undefined=StrictUndefined, keep_trailing_newline=True, auto_reload=False, cache_size=0
        )
        self.filters = {k: self._guarded(k, v, _CONSTANT_FILTERS) for k, v in self.filters.items() if k in FILTERS}
        self.tests = {k: self._guarded(k, v, _CONSTANT_TESTS) for k, v in self.tests.items()}
        self.globals = {
            "range": self._range,
            "dict": dict,
            "cycler": self.globals["cycler"],
            "joiner": self.globals["joiner"],
        }
        self.meter = _Meter()

    @property
    def budget(self) -> int:
        return self.meter.budget

    @budget.setter
    def budget(self, steps: int) -> None:
        self.meter.budget = steps

    def start(self) -> None:
        """A fresh budget, and MAX_SECONDS of CPU time, for one template of one message in this thread."""
        meter = self.meter
        meter.budget = MAX_STEPS
        meter.deadline = time.thread_time() + MAX_SECONDS

    # -- the count ------------------------------------------------------------------------

    def spend(self, steps: int) -> None:
        """Spend ``steps``; the CPU time is looked at each time the budget passes a multiple of 512 steps."""
        meter = self.meter
        before = meter.budget
        meter.budget = after = before - steps
        if after < 0 or before >> 9 != after >> 9:
            self._look(meter)

    @staticmethod
    def _look(meter: _Meter) -> None:
        if meter.budget < 0:
            raise _exhausted()
        if time.thread_time() > meter.deadline:
            raise TooSlow(f"took more than {MAX_SECONDS:g} s of CPU time to render")

    def spent(self, value):
        """``value``, its weight spent."""
        meter = self.meter
        meter.budget -= 1 + len(value) // CHARS_PER_STEP if value.__class__ is str else weight(value, meter.budget)
        if meter.budget < 0:
            raise _exhausted()
        return value

    def steps(self, iterable):
        """The items of a loop, one step each."""
        meter = self.meter
        for item in iterable:
            meter.budget -= 1
            if meter.budget & 511 == 0 or meter.budget < 0:
                self._look(meter)
            yield item

    def text(self, convert, value) -> str:
        """An output: its weight spent before it is made a string."""
        meter = self.meter
        meter.budget -= 1 + len(value) // CHARS_PER_STEP if value.__class__ is str else weight(value, meter.budget)
        if meter.budget < 0:
            raise _exhausted()
        return convert(value)

    def joined(self, join, parts: tuple) -> str:
        """``a ~ b ~ …``: the parts' weight spent before they are joined."""
        self.spend(sum(weight(part, self.budget) for part in parts))
        return join(parts)

    def _weigh(self, args, kwargs) -> None:
        """A step, and the weight of a call's arguments (not Jinja's own ``_loop_vars``…)."""
        budget = self.meter.budget
        cost = 1
        for value in args:
            cost += 1 + len(value) // CHARS_PER_STEP if value.__class__ is str else weight(value, budget)
        if kwargs:
            cost += sum(weight(value, budget) for key, value in kwargs.items() if key[0] != "_")
        self.spend(cost)

    # -- what the sandbox intercepts --------------------------------------------------------

    def _range(self, *args: int) -> range:
        items = range(*args)
        try:
            size = len(items)
        except OverflowError:
            size = MAX_STEPS + 1
        if size > MAX_STEPS:
            raise BudgetError(f"more than {MAX_STEPS:,} loop items in one range()")
        return items

    def _guarded(self, name: str, function, constant: frozenset[str]):
        """A filter or test that spends the weight of what it is given and makes."""
        if name in constant:
            return function
        skip = 0 if getattr(function, "jinja_pass_arg", None) is None else 1  # the context, environment…
        if name in _LAZY:

            @functools.wraps(function)
            def lazy(*args, **kwargs):
                self.spend(1)
                if name == "items":  # it must be given the mapping itself
                    return self.steps(function(*args, **kwargs))
                return function(*args[:skip], self.steps(args[skip]), *args[skip + 1 :], **kwargs)

            return lazy
        check = getattr(self, f"_check_{name}", None)
        per_char, per_item = _CHARS_PER_STEP.get(name), _STEPS_PER_ITEM.get(name)

        @functools.wraps(function)
        def guarded(*args, **kwargs):
            self._weigh(args[skip:], kwargs)
            if check is not None and len(args) > skip:
                args = (*args[:skip], check(*args[skip:], **kwargs), *args[skip + 1 :])
            if (per_char or per_item) and len(args) > skip:
                self.spend(_costly(args[skip], per_char, per_item))
            return self.spent(function(*args, **kwargs))

        return guarded

    # checks before a filter runs; each returns the value the filter is to be given

    def _check_replace(self, s, old, new, count=None):
        _replaced(str(s), str(old), str(new), count)
        return s

    def _check_join(self, value, d="", attribute=None):
        items = self.spent(list(value))
        _too_big("a join", len(str(d)) * max(len(items) - 1, 0))
        return items

    def _check_urlize(self, value, trim_url_limit=None, nofollow=False, target=None, rel=None, extra_schemes=None):
        text = str(value)  # a link takes at least 4 characters, and each gets the target and rel again
        links = len(text) // 4 + 1
        _too_big("urlize", 3 * len(text) + links * (64 + len(str(target or "")) + len(str(rel or ""))))
        return value

    def _check_tojson(self, value, indent=None):
        if indent is not None:
            raise BudgetError("tojson's indent is not allowed in a campaign template")
        return value

    def is_safe_attribute(self, obj, attr: str, value) -> bool:
        if attr in _EXPANDING and isinstance(obj, str | bytes | int):
            return False  # their results can be any size: use the filters
        return super().is_safe_attribute(obj, attr, value)

    def wrap_str_format(self, value):
        return None  # str.format is refused by is_safe_attribute, not wrapped

    def call(__self, __context, __obj, *args, **kwargs):  # Jinja's own signature
        if isinstance(__obj, Macro):  # a macro is given its arguments, not copies; its output is counted
            __self.spend(MACRO_STEPS)
            return __self.spent(super().call(__context, __obj, *args, **kwargs))
        if isinstance(__obj, LoopContext) and args:  # loop(children) in a recursive loop
            args = (__self.steps(args[0]), *args[1:])
        target = getattr(__obj, "__self__", None)  # the str of a bound method
        __self._weigh(args, kwargs)
        if isinstance(target, str | bytes | list | tuple):  # its methods go through it, not into its items
            per_char = _CHARS_PER_STEP.get(getattr(__obj, "__name__", ""), CHARS_PER_STEP)
            __self.spend(len(target) // per_char if isinstance(target, str | bytes) else len(target))
        if isinstance(target, str | bytes) and args:
            name = getattr(__obj, "__name__", "")
            if name == "replace":
                _replaced(target, *args[:3])
            elif name == "join":
                args = (__self.spent(list(args[0])), *args[1:])
                _too_big("a join", len(target) * max(len(args[0]) - 1, 0))
        return __self.spent(super().call(__context, __obj, *args, **kwargs))

    def call_binop(self, context, operator: str, left, right):
        self.spend(1 + weight(left, self.budget) + weight(right, self.budget))
        if operator == "*":
            if isinstance(left, int) and isinstance(right, int):
                _too_big("a product", left.bit_length() + right.bit_length(), MAX_INT_BITS, "bits")
            elif isinstance(right, str | list | tuple) and isinstance(left, int):
                left, right = right, left
            if isinstance(left, str | list | tuple) and isinstance(right, int) and right > 0:
                _too_big("repetition", len(left) * right, unit="items")
                self.spend(
                    len(left) * right // CHARS_PER_STEP
                    if isinstance(left, str)
                    else right * weight(left, self.budget // right)
                )
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
            _too_big("power too large: a power", left.bit_length() * right, MAX_INT_BITS, "bits")
        elif operator == "+" and isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
            _too_big("a sum", len(left) + len(right), unit="items")
        elif operator == "%" and isinstance(left, str):
            size = len(left) + CHARS_PER_STEP * weight(right, MAX_STEPS)
            for width, precision in _PERCENT.findall(left):
                if "*" in (width, precision):
                    raise BudgetError("a '*' width in % formatting is not allowed in a campaign template")
                size += int(width or 0) + int(precision or 0)
            _too_big("% formatting", size)
        result = super().call_binop(context, operator, left, right)
        if result.__class__ is int:
            _too_big("a number", result.bit_length(), MAX_INT_BITS, "bits")
        return self.spent(result)
