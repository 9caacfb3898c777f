"""Campaign templates: Jinja2 in a sandbox, checked when the campaign is created, compiled once.

Variables: ``name``, ``email``, ``unsubscribe_url``, ``confirm_url`` (a double opt-in confirmation's
link; empty in other messages), ``attributes`` (the subscriber's JSON
attributes: ``{{ attributes.city | default("") }}``) and ``campaign`` (``campaign.name``,
``campaign.id``). Conditionals, loops and the common filters work; anything else is refused
when the campaign is created, with the line: an unknown variable, a syntax error, an
attribute starting with ``_`` (``{{ ''.__class__ }}``), ``import``/``include``/``extends``,
and filters that can blow a message up (``center``, ``indent``, ``format``, ``wordwrap``…)
or differ between retries (``random``). A variable that is missing for one subscriber
(StrictUndefined) fails that recipient alone, with the reason.

Bounds for one message: each template runs on a budget of ``MAX_STEPS`` steps (loop items,
calls, filters, operators, outputs, and the data they handle) with no value and no output over
``MAX_OUTPUT`` characters (service/mail/sandbox.py); past it the recipient fails with the reason, and
a template that exceeds it for the sample subscriber is refused when checked. The sandbox is
immutable (no ``list.append``). A template is at most ``MAX_TEMPLATE`` characters.

Speed: a body is cut into lines. Lines without template syntax are static (the caller
encodes them once); a line, or a run of lines inside one block, that holds only plain
``{{ name }}``, ``{{ email }}`` or ``{{ unsubscribe_url }}`` fields becomes a str.format
string; only the rest is run by Jinja, per recipient. A template using ``set``, ``macro`` or
whitespace control (``{%-``) carries state across lines and is run by Jinja as a whole.
"""

import functools
import json
import re
from collections.abc import Iterator, Mapping

from jinja2 import Template, TemplateError, TemplateSyntaxError, meta, nodes
from jinja2.runtime import Context
from jinja2.sandbox import SecurityError
from markupsafe import escape

from service.errors import Invalid
from service.mail.sandbox import MAX_OUTPUT, Sandbox

VARIABLES = ("name", "email", "unsubscribe_url", "confirm_url", "attributes", "campaign")
SIMPLE = frozenset(("name", "email", "unsubscribe_url", "confirm_url"))  # the fields a str.format string can fill
LINK_FIELD = "_click"  # a tracked link's field, _click0, _click1, … (service/mail/clicks.py): no template may name it
MAX_TEMPLATE = 500_000  # characters of one template
_BLOCKS = frozenset(("if", "for", "filter", "with", "autoescape", "call"))  # tags closed by end<tag>
_STATEFUL = frozenset(("set", "macro", "block", "extends", "include", "import", "from"))
_NEWLINE = re.compile(r"\r\n|\r|\n")
_CR = re.compile(r"\r\n?")


class RenderError(ValueError):
    """One recipient's message cannot be rendered (a ValueError: the recipient fails, not the node)."""


TEXT, HTML = Sandbox(html=False), Sandbox(html=True)


# -- checking ---------------------------------------------------------------------------


def _refuse(where: str, line: int | None, problem: str) -> Invalid:
    problem = " ".join(problem.split())[:300]
    return Invalid(f"{where}: line {line}: {problem}" if line else f"{where}: {problem}")


def _first_line(tree: nodes.Node, node_type, test) -> int | None:
    lines = [node.lineno for node in tree.find_all(node_type) if test(node)]
    return min(lines) if lines else None


def parse(env: Sandbox, text: str, where: str) -> nodes.Template:
    """The template's tree; Invalid, one line with the template's line, when it is refused."""
    if len(text) > MAX_TEMPLATE:
        raise Invalid(f"{where}: longer than {MAX_TEMPLATE:,} characters")
    try:
        tree = env.parse(text)
    except TemplateSyntaxError as exc:
        if found := _loading_tag(env, text):  # `{% import os %}` is refused for what it tries, not its syntax
            raise _refuse(where, found[0], f"{found[1]} is not allowed: a campaign template stands alone") from None
        raise _refuse(where, exc.lineno, exc.message or "syntax error") from None
    for node_type, what in (
        (nodes.Extends, "extends"),
        (nodes.Include, "include"),
        (nodes.Import, "import"),
        (nodes.FromImport, "import"),
    ):
        if line := _first_line(tree, node_type, lambda node: True):
            raise _refuse(where, line, f"{what} is not allowed: a campaign template stands alone")
    private = (
        (lambda node: node.attr.startswith("_")),
        (lambda node: isinstance(node.arg, nodes.Const) and str(node.arg.value).startswith("_")),
    )
    for private_type, test in zip((nodes.Getattr, nodes.Getitem), private, strict=True):
        if line := _first_line(tree, private_type, test):
            raise _refuse(where, line, "names starting with '_' are not allowed")
    for node in tree.find_all(nodes.Filter):
        if node.name not in env.filters:
            raise _refuse(where, node.lineno, f"no filter named {node.name!r} here")
    unknown = _unknown_names(env, tree)
    if unknown:
        name, line = unknown
        raise _refuse(where, line, f"unknown variable {name!r}; known: {', '.join(VARIABLES)}")
    return tree


_LOADING = {"extends": "extends", "include": "include", "import": "import", "from": "import"}


def _loading_tag(env: Sandbox, text: str) -> tuple[int, str] | None:
    """(line, what) of the first tag that would load another template, found by the lexer alone."""
    tag_next = False
    try:
        for lineno, kind, value in env.lex(text):
            if kind == "name" and tag_next and value in _LOADING:
                return lineno, _LOADING[value]
            tag_next = kind == "block_begin" or (tag_next and kind == "whitespace")
    except TemplateSyntaxError:
        return None
    return None


def _unknown_names(env: Sandbox, tree: nodes.Template) -> tuple[str, int] | None:
    names = meta.find_undeclared_variables(tree) - set(VARIABLES) - set(env.globals)
    if not names:
        return None
    first = min((node.lineno, node.name) for node in tree.find_all(nodes.Name) if node.name in names)
    return first[1], first[0]


# A template's check and its compiled pieces are kept for the next campaign of the same text: every
# transactional message is a campaign of its own, mostly of one of a few stored templates, and the claimer
# compiled each, 3.7 ms of the event loop (the API's trial of a message's sources already skipped sources it
# had tried: service/messages/messages.py check_sources, which also spares the worker thread). Only texts up to KEPT
# characters, and the last KEPT_TEXTS of them, are kept; an account's many texts cost another's at most a
# compile. A refused text is not kept: it is checked, and refused, again.
KEPT = 64 * 1024
KEPT_TEXTS = 256


def check(text: str, where: str, html: bool = False) -> set[str]:
    """The variables the template uses; Invalid, one line naming ``where`` and the line, when
    it is refused.

    Beyond the syntax it renders the template once for a sample subscriber without attributes:
    what fails for every subscriber (a sandbox violation, a loop too long) is refused here.
    """
    return set(_kept_check(text, where, html) if len(text) <= KEPT else _check(text, where, html))


@functools.lru_cache(maxsize=KEPT_TEXTS)
def _kept_check(text: str, where: str, html: bool) -> frozenset[str]:
    return _check(text, where, html)


def _check(text: str, where: str, html: bool) -> frozenset[str]:
    env = HTML if html else TEXT
    tree = parse(env, text, where)
    try:
        template = env.from_string(tree)
    except TemplateSyntaxError as exc:
        raise _refuse(where, exc.lineno, exc.message or "syntax error") from None
    sample = {
        "name": "Jane Doe",
        "email": "jane@example.org",
        "unsubscribe_url": "https://example.org/u?token=x",
        "confirm_url": "https://example.org/c?token=x",
        "attributes": {},
        "campaign": {"id": 1, "name": "sample"},
    }
    try:
        run(template, sample)
    except RenderError as exc:
        if not isinstance(exc.__cause__, TemplateError) or isinstance(exc.__cause__, SecurityError):
            raise _refuse(where, None, str(exc)) from None
        # an undefined attribute may be defined for real subscribers: their render decides
    return frozenset(meta.find_undeclared_variables(tree) & set(VARIABLES))


# -- running ----------------------------------------------------------------------------


def context(env: Sandbox, variables: Mapping) -> Context:
    """One recipient's variables for every template of ``env`` in one message (a Jinja context
    costs more to make than a short template costs to run); starts the template's budget for this
    message (service/mail/sandbox.py)."""
    env.start()
    return Context(env, {**env.globals, **variables}, None, {})


def run(template, variables: Mapping | Context) -> str:
    """The template's output for one recipient; RenderError when it cannot be produced."""
    if not isinstance(variables, Context):
        variables = context(template.environment, variables)
    out: list[str] = []
    size = 0
    try:
        for piece in template.root_render_func(variables):
            size += len(piece)
            if size > MAX_OUTPUT:
                raise RenderError(f"the message would be longer than {MAX_OUTPUT:,} characters")
            out.append(piece)
    except RenderError:
        raise
    except Exception as exc:  # whatever the operator's template does with this data fails this recipient
        raise RenderError(str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__) from exc
    return "".join(out)


def line_breaks(value: str) -> str:
    """``value`` with each CRLF and each bare CR as "\n".

    A value's line break must be one line break however its line is rendered: Jinja running
    several lines at once would join a value's trailing CR with the template's own LF into one
    CRLF, while a line filled alone ends with its own CRLF after the value's CR, two breaks."""
    return _CR.sub("\n", value) if "\r" in value else value


def _without_cr(value):
    if isinstance(value, str):
        return line_breaks(value)
    if isinstance(value, dict):
        return {line_breaks(k): _without_cr(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_cr(item) for item in value]
    return value


def attributes(raw: str | Mapping | None) -> Mapping:
    """The subscriber's attributes as a mapping (asyncpg hands jsonb over as text), every string's
    line breaks as "\n" (line_breaks)."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        value = json.loads(raw)
        if not isinstance(value, dict):
            return {}
        return _without_cr(value) if "\\r" in raw else value  # JSON writes a CR as \r
    return _without_cr(dict(raw))


# -- cutting a body into pieces ---------------------------------------------------------


def _spans(env: Sandbox, text: str) -> list[tuple[int, int]] | None:
    """Line spans (0-based, inclusive) that hold template syntax, a block's lines as one span;
    None when the template carries state from line to line (then it is run as a whole)."""
    spans: list[tuple[int, int]] = []
    depth, block_start, construct_start, expect_tag, closing = 0, 0, 0, False, False
    for lineno, kind, value in env.lex(text):
        line = lineno - 1
        if kind in ("block_begin", "variable_begin", "comment_begin", "raw_begin"):
            if "-" in value or "+" in value:
                return None  # whitespace control reaches into the neighbouring lines
            construct_start, expect_tag = line, kind == "block_begin"
        elif kind == "name" and expect_tag:
            expect_tag = False
            if value in _STATEFUL:
                return None
            if value in _BLOCKS:
                block_start = construct_start if depth == 0 else block_start
                depth += 1
            elif value.startswith("end"):
                depth -= 1
                closing = depth == 0
        elif kind in ("block_end", "variable_end", "comment_end", "raw_end"):
            if "-" in value or "+" in value:
                return None
            if depth == 0:
                spans.append((block_start if closing else construct_start, line))
                closing = False
        elif kind != "whitespace":
            expect_tag = False
    return spans


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _simple_format(tree: nodes.Template) -> str | None:
    """A str.format string when the template is only text and plain name/email/unsubscribe_url fields."""
    if len(tree.body) != 1 or not isinstance(tree.body[0], nodes.Output):
        return None if tree.body else ""
    parts = []
    for node in tree.body[0].nodes:
        if isinstance(node, nodes.TemplateData):
            parts.append(node.data.replace("{", "{{").replace("}", "}}"))
        elif isinstance(node, nodes.Name) and (node.name in SIMPLE or node.name.startswith(LINK_FIELD)):
            parts.append("{" + node.name + "}")
        else:
            return None
    return "".join(parts)


def piece(env: Sandbox, text: str) -> str | Template:
    """A piece of a body or subject: a str.format string (fast) or a compiled Jinja template."""
    tree = env.parse(text)
    simple = _simple_format(tree)
    return simple if simple is not None else env.from_string(tree)


def compiled(env: Sandbox, text: str) -> tuple:
    """The body's pieces: static runs of lines as text, format strings, Jinja templates; runs of
    lines next to each other that both need Jinja are one template (one run per message). A compiled
    Jinja template is run for any number of messages, in any thread: it holds no state of a run."""
    return _kept_pieces(env, text) if len(text) <= KEPT else _compiled(env, text)


@functools.lru_cache(maxsize=KEPT_TEXTS)
def _kept_pieces(env: Sandbox, text: str) -> tuple:
    return _compiled(env, text)


def _compiled(env: Sandbox, text: str) -> tuple:
    result: list = []
    previous = None  # the source of the last piece when it is a Jinja template
    for dynamic, lines in pieces(env, text):
        item = piece(env, lines) if dynamic else lines
        if dynamic and item.__class__ is not str:
            if previous is not None:
                lines = previous + "\n" + lines
                item = env.from_string(lines)
                result.pop()
            previous = lines
        else:
            previous = None
        result.append((dynamic, item))
    return tuple(result)


def pieces(env: Sandbox, text: str) -> Iterator[tuple[bool, str]]:
    """The body as (dynamic, text) runs of whole lines without their final line break; ``text``
    must have passed check()."""
    lines = _NEWLINE.split(text)
    if lines[-1] == "":
        lines.pop()  # the text ended with a line break
    spans = _spans(env, text)
    if spans is None:
        yield True, "\n".join(lines)
        return
    position = 0
    for start, end in _merged(spans):
        if start > position:
            yield False, "\n".join(lines[position:start])
        yield True, "\n".join(lines[start : end + 1])
        position = end + 1
    if position < len(lines) or not lines:
        yield False, "\n".join(lines[position:])


def escaped(values: Mapping[str, str]) -> dict[str, str]:
    """The simple fields HTML-escaped exactly as Jinja's autoescape does."""
    return {key: str(escape(value)) for key, value in values.items()}
