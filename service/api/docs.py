"""GET /api/v1/docs: the API's reference, one HTML page made on the server from the generated OpenAPI
document — no script, no style sheet or font from elsewhere, so it reads the same with no outside network.

A table of contents first: each group of routes, and under it each of its operations, a link to its block.
Then one block per operation, stacked: its parameters, its body, and the answers it gives of its own; the answers
every operation may give are said once, at the top. On a narrow screen a table's rows are stacked too, each
cell labelled by its column, so that no column is squeezed to a character a line. Text from the document is
escaped; a `span` between backticks in it is shown as code."""

from collections.abc import Sequence
from html import escape

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

STYLE = """body{font:16px/1.5 system-ui,sans-serif;max-width:60rem;margin:0 auto;padding:1rem;color:#1a1a1a}
h2{border-top:1px solid #ccc;padding-top:1rem}code{font-family:ui-monospace,monospace;font-size:.9em}
.op{margin:1rem 0;padding:.5rem 1rem;border-left:4px solid #0b5cad;background:#f4f7fb;overflow-wrap:anywhere}
.op>p:first-child{margin-top:0}.m{font-weight:700;color:#0b5cad}table{border-collapse:collapse;width:100%}
td,th{padding:.2rem .6rem;text-align:left;vertical-align:top;border-bottom:1px solid #ddd}
td:first-child,th{white-space:nowrap}td{overflow-wrap:normal}dl{margin:.5rem 0}
dt{float:left;clear:left;font-weight:700;width:3rem}dd{margin:0 0 .2rem 3.5rem}.a{margin:.5rem 0 0}
a:focus{outline:3px solid #0b5cad}nav{overflow-wrap:anywhere}nav ul{padding-left:1.2rem}nav li li{font-size:.95em}
@media (max-width:40rem){body{padding:.75rem}.op{padding:.5rem .75rem}
table,tbody,tr,td{display:block}tr:first-child{position:absolute;width:1px;height:1px;overflow:hidden;
clip:rect(0 0 0 0)}tr{border-bottom:1px solid #ddd;padding:.3rem 0}td{border:0;padding:0;overflow-wrap:anywhere}
td:first-child{white-space:normal;font-weight:700}td[data-label]{display:inline;margin-right:1rem}
td[data-label]::before{content:attr(data-label) ": ";color:#555}}"""
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


def text(said: str) -> str:
    """`said` escaped, each span between a pair of backticks as code (an unpaired backtick stays as it is)."""
    parts = said.split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: the last one is text
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    return "".join(f"<code>{escape(part)}</code>" if i % 2 else escape(part) for i, part in enumerate(parts))


def _type(schema: dict) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f'<a href="#{escape(name)}">{escape(name)}</a>'
    if "anyOf" in schema:
        return " | ".join(_type(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " | ".join(f"<code>{escape(str(v))}</code>" for v in schema["enum"])
    return escape(str(schema.get("type", "any")))


def _table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """A table whose cells are HTML already; past the first, each cell names its column on a narrow screen
    (the description, the last, goes unnamed: it reads as what it is)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    labels = [""] + [f' data-label="{escape(h)}"' for h in headers[1:-1]] + [""]
    body = "".join(
        "<tr>" + "".join(f"<td{label}>{cell}</td>" for label, cell in zip(labels, row, strict=True)) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _answers(answers: dict, generic: set[str]) -> str:
    own = sorted((code, answer) for code, answer in answers.items() if code not in generic)
    return (
        "<dl>"
        + "".join(f"<dt>{escape(code)}</dt><dd>{text(answer.get('description', ''))}</dd>" for code, answer in own)
        + "</dl>"
    )


def _operation(path: str, method: str, op: dict, generic: set[str]) -> str:
    rows = [
        (
            f"<code>{escape(p['name'])}</code>",
            escape(p["in"]) + (" (required)" if p.get("required") else ""),
            _type(p.get("schema", {})),
            text(p.get("description", p.get("schema", {}).get("description", ""))),
        )
        for p in op.get("parameters", [])
    ]
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    anchor = f' id="{escape(op["operationId"])}"' if "operationId" in op else ""
    return (
        f'<div class="op"{anchor}><p><span class="m">{method.upper()}</span> <code>/api/v1{escape(path)}</code> '
        f"— {text(op.get('summary', ''))}</p>"
        + (_table(("parameter", "in", "type", "description"), rows) if rows else "")
        + (f"<p>body: {_type(body)}</p>" if body else "")
        + f'<p class="a">answers of its own:</p>{_answers(op.get("responses", {}), generic)}</div>'
    )


def _schema(name: str, schema: dict) -> str:
    required = set(schema.get("required", []))
    rows = [
        (
            f"<code>{escape(field)}</code>{'' if field in required else ' (optional)'}",
            _type(spec),
            text(spec.get("description", "")),
        )
        for field, spec in schema.get("properties", {}).items()
    ]
    return f'<h3 id="{escape(name)}">{escape(name)}</h3>' + _table(("field", "type", "description"), rows)


def _tag_id(tag: str) -> str:
    return "routes-" + "".join(c if c.isalnum() else "-" for c in tag.lower())


def _contents(by_tag: dict[str, list[tuple[str, str, dict]]]) -> str:
    """The table of contents: each group of routes, and each of its operations that has an anchor."""
    groups = "".join(
        f'<li><a href="#{_tag_id(tag)}">{escape(tag)}</a><ul>'
        + "".join(
            f'<li><a href="#{escape(op["operationId"])}">{method.upper()} <code>{escape(path)}</code></a></li>'
            for path, method, op in ops
            if "operationId" in op
        )
        + "</ul></li>"
        for tag, ops in by_tag.items()
    )
    return f'<nav aria-label="contents"><h2>Contents</h2><ul>{groups}<li><a href="#shapes">Shapes</a></li></ul></nav>'


def page(app: FastAPI) -> HTMLResponse:
    document = app.openapi()
    operations = [(path, method, op) for path, ops in document["paths"].items() for method, op in ops.items()]
    # the answers every operation declares (the API's own, app.py's `responses`) are said once, at the top
    generic = set.intersection(*(set(op.get("responses", {})) for _, _, op in operations)) if operations else set()
    said = operations[0][2]["responses"] if operations else {}
    by_tag: dict[str, list[tuple[str, str, dict]]] = {}
    for path, method, op in operations:
        by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((path, method, op))
    sections = "".join(
        f'<h2 id="{_tag_id(tag)}">{escape(tag)}</h2>' + "".join(_operation(*o, generic) for o in ops)
        for tag, ops in by_tag.items()
    )
    schemas = "".join(_schema(n, s) for n, s in document.get("components", {}).get("schemas", {}).items())
    html = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
        f'content="width=device-width, initial-scale=1"><title>einmal API</title><style>{STYLE}</style></head>'
        f"<body><h1>einmal API v1</h1><p>Every route needs <code>Authorization: Bearer &lt;key&gt;</code> "
        f"(<code>einmal account key create</code>) and acts for that key's account alone. Every POST takes "
        f"an <code>Idempotency-Key</code>. Every answer that is not a success is "
        f'<code>{{"error": "…"}}</code>. The machine-readable document: '
        f'<a href="openapi.json">openapi.json</a>.</p>'
        f"<p>Every operation may answer:</p>{_answers({c: said[c] for c in generic}, set())}"
        f'{_contents(by_tag)}{sections}<h2 id="shapes">Shapes</h2>{schemas}</body></html>'
    )
    return HTMLResponse(html, headers=HEADERS)
