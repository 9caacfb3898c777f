"""GET /api/v1/docs: the API's reference, one HTML page made on the server from the generated OpenAPI
document — no script, no style sheet or font from elsewhere, so it reads the same with no outside network."""

from html import escape

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

STYLE = """body{font:16px/1.5 system-ui,sans-serif;max-width:60rem;margin:0 auto;padding:1rem;color:#1a1a1a}
h2{border-top:1px solid #ccc;padding-top:1rem}code,pre{font-family:ui-monospace,monospace;font-size:.9em}
.op{margin:1rem 0;padding:.5rem 1rem;border-left:4px solid #0b5cad;background:#f4f7fb;overflow-wrap:anywhere}
.m{font-weight:700;color:#0b5cad}table{border-collapse:collapse;display:block;overflow-x:auto;max-width:100%}
p>code{overflow-wrap:anywhere}
th,td:first-child,td:nth-child(2),td:nth-child(3){white-space:nowrap}td,th{padding:.2rem .6rem;text-align:left;
vertical-align:top;border-bottom:1px solid #ddd}a:focus{outline:3px solid #0b5cad}"""
HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
           "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


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


def _operation(path: str, method: str, op: dict) -> str:
    rows = "".join(f"<tr><td><code>{escape(p['name'])}</code></td><td>{escape(p['in'])}"
                   f"{' (required)' if p.get('required') else ''}</td><td>{_type(p.get('schema', {}))}</td>"
                   f"<td>{escape(p.get('description', p.get('schema', {}).get('description', '')))}</td></tr>"
                   for p in op.get("parameters", []))
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    answers = ", ".join(f"{escape(code)} {escape(answer.get('description', ''))}"
                        for code, answer in op.get("responses", {}).items())
    return (f'<div class="op"><p><span class="m">{method.upper()}</span> <code>/api/v1{escape(path)}</code> — '
            f"{escape(op.get('summary', ''))}</p>"
            + (f"<table><tr><th>parameter</th><th>in</th><th>type</th><th></th></tr>{rows}</table>" if rows else "")
            + (f"<p>body: {_type(body)}</p>" if body else "") + f"<p>answers: {answers}</p></div>")


def _schema(name: str, schema: dict) -> str:
    required = set(schema.get("required", []))
    rows = "".join(f"<tr><td><code>{escape(field)}</code>{'' if field in required else ' (optional)'}</td>"
                   f"<td>{_type(spec)}</td><td>{escape(spec.get('description', ''))}</td></tr>"
                   for field, spec in schema.get("properties", {}).items())
    return f'<h3 id="{escape(name)}">{escape(name)}</h3><table>{rows}</table>'


def page(app: FastAPI) -> HTMLResponse:
    document = app.openapi()
    by_tag: dict[str, list[str]] = {}
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            by_tag.setdefault((op.get("tags") or ["other"])[0], []).append(_operation(path, method, op))
    sections = "".join(f"<h2>{escape(tag)}</h2>{''.join(ops)}" for tag, ops in by_tag.items())
    schemas = "".join(_schema(n, s) for n, s in document.get("components", {}).get("schemas", {}).items())
    html = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width, initial-scale=1"><title>einmal API</title><style>{STYLE}</style></head>'
            f"<body><h1>einmal API v1</h1><p>Every route needs <code>Authorization: Bearer &lt;key&gt;</code> "
            f"(<code>einmal accounts key create</code>) and acts for that key's account alone. Every POST takes "
            f"an <code>Idempotency-Key</code>. The machine-readable document: "
            f'<a href="openapi.json">openapi.json</a>.</p>{sections}<h2>Shapes</h2>{schemas}</body></html>')
    return HTMLResponse(html, headers=HEADERS)
