"""The JSON API under /api/v1 (docs/design.md#api; docs/guide/http-api.md): FastAPI on the Starlette the HTTP
actor already serves, so that the OpenAPI document (/api/v1/openapi.json) is generated from the models of
the routes, never written by hand.

Every route but the document needs `Authorization: Bearer <key>` (`einmal account key create`): 401
without a valid key (found from the headers before the body is read: deps.KeyFirst), 429 for a client
network past its failed keys (deps.Guesses), 403 for a read key on a route that writes. A request acts for
its key's account alone: anything of another account is 404, as if it did not exist. Bodies are bounded
before they are read by the HTTP surface (service/web/limits.py BoundedBody). Every answer that is not a
success is {"error": "…"}, with "code" and "field" when one field is wrong (FIXES)."""

from collections.abc import Callable

import asyncpg
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from service import db
from service.api import (
    account,
    campaign_rows,
    campaigns,
    deps,
    docs,
    doctor,
    drafts,
    idempotency,
    key_routes,
    lists,
    messages,
    optin,
    previews,
    segments,
    senders,
    sequences,
    subscribers,
    suppressions,
    webhooks,
)
from service.api.deps import FIXES, GENERIC, log
from service.asgi import NUL
from service.errors import Busy, EinmalError
from service.messages import batch as message_batch
from service.settings import Settings
from service.subscribers import batch

ROUTES = (
    subscribers,
    lists,
    suppressions,
    campaigns,
    campaign_rows,
    previews,
    drafts,
    key_routes,
    account,
    senders,
    optin,
    doctor,
    webhooks,
    messages,
    sequences,
    segments,
)


# the paths whose bodies are bounded otherwise than the surface's (64 KiB), under the API's prefix
BODY_LIMITS = {"/subscribers/batch": batch.MAX_BODY, "/messages/batch": message_batch.MAX_BODY}


def served(pool: asyncpg.Pool, settings: Settings, bounded: Callable[[ASGIApp, int | None], ASGIApp]) -> ASGIApp:
    """The API as the HTTP surface serves it (service/web/app.py, given it by actors/node.py): its key found
    from the headers before anything else (deps.KeyFirst), then its body read within the surface's bounds
    (`bounded`: service/web/limits.py BoundedBody, at its own limit or one of BODY_LIMITS), then the API."""
    app = build(pool, settings)
    return deps.KeyFirst(_ByPath(bounded(app, None), {p: bounded(app, n) for p, n in BODY_LIMITS.items()}), pool)


class _ByPath:
    """A request to one of `paths` (under the API's prefix) to its own app, the others to `app`."""

    def __init__(self, app: ASGIApp, paths: dict[str, ASGIApp]) -> None:
        self.app, self.paths = app, paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")[len(scope.get("root_path", "")) :]
        await self.paths.get(path, self.app)(scope, receive, send)


def build(pool: asyncpg.Pool, settings: Settings) -> ASGIApp:
    """The API, its POSTs behind the Idempotency-Key claim (service/api/idempotency.py). It is served behind
    deps.KeyFirst, which finds the request's key before the body is read (service/web/app.py)."""
    return idempotency.Idempotent(api(pool, settings), pool, settings.message_key_hours * 3600)


def api(pool: asyncpg.Pool, settings: Settings) -> FastAPI:
    app = FastAPI(
        title="einmal",
        version="1",
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
        responses=GENERIC,
        redirect_slashes=False,
    )  # no redirect: it would name the Host header's site
    app.state.pool, app.state.sections = pool, deps.Sections.of(settings)
    app.add_exception_handler(StarletteHTTPException, _problem)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(EinmalError, _refused)
    for exc in db.UNAVAILABLE:
        app.add_exception_handler(exc, _unavailable)
    # text PostgreSQL cannot hold (a NUL character) wherever a route passes it on: in a text parameter
    # (CharacterNotInRepertoireError) or as \u0000 in JSON cast to jsonb (UntranslatableCharacterError)
    for unstorable in (asyncpg.CharacterNotInRepertoireError, asyncpg.UntranslatableCharacterError):
        app.add_exception_handler(unstorable, _unstorable)
    # a transaction PostgreSQL rolled back for another's sake (a deadlock, a serialization failure): 503, retried
    for rolled_back in (asyncpg.DeadlockDetectedError, asyncpg.SerializationError):
        app.add_exception_handler(rolled_back, _rolled_back)
    for module in ROUTES:
        app.include_router(module.router)
    app.openapi = _documented(app, app.openapi)  # type: ignore[method-assign]  # FastAPI's way to amend it
    reference: list[
        Response
    ] = []  # made at the first request, once: the document does not change while the process runs

    @app.get("/docs", include_in_schema=False)
    async def read_the_docs() -> Response:
        reference[:] = reference or [docs.page(app)]
        return reference[0]

    return app


IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "the same key with the same request returns the first answer, without a second effect "
    "(EINMAL_MESSAGE_KEY_HOURS, 72 h by default); "
    "with another request, 422",
    "schema": {"type": "string", "minLength": 1, "maxLength": idempotency.MAX_KEY, "pattern": "^[ -~]+$"},
}
REPLAYED = {
    "description": "`true` when this is the kept answer of an earlier request with the same Idempotency-Key",
    "schema": {"type": "string", "enum": ["true"]},
}
RETRY_AFTER = {"description": "the seconds to wait before trying again", "schema": {"type": "integer"}}
WAITED = "a request with this Idempotency-Key is still running (waited for 10 s): try again after Retry-After"
NOT_JSON = "the body is not JSON"
BAD_KEY = f"the Idempotency-Key is not 1 to {idempotency.MAX_KEY} printable ASCII characters"
READ_ONLY = "the key may only read"
PROBLEM = {"application/json": {"schema": {"$ref": "#/components/schemas/Problem"}}}


def _documented(app: FastAPI, generate: Callable[[], dict]) -> Callable[[], dict]:
    """app.openapi: FastAPI's document with what every route of a kind answers, said here once rather than on
    each route: 403 for a read key on a route that writes (deps.key); 400 for a body that is not JSON; for
    every POST what service/api/idempotency.py answers: the Idempotency-Key header, its 400, the 409 of a
    wait, `Idempotent-Replayed` on the answers it keeps (not 401, not 5xx); `Retry-After` on 409, 429, 503.
    And the models of the bodies a route reads itself (READ_ITSELF of subscribers and messages), as FastAPI
    would put them."""

    def document() -> dict:
        made_now = app.openapi_schema is None
        schema = generate()
        if made_now:
            for operations in schema["paths"].values():
                for method, operation in operations.items():
                    _answers_of(method, operation)
            models = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in (*subscribers.READ_ITSELF, *messages.READ_ITSELF):
                made = model.model_json_schema(ref_template="#/components/schemas/{model}")
                for one in [*made.pop("$defs", {}).values(), made]:
                    for field in one.get("properties", {}).values():  # FastAPI leaves out a default of null
                        if "default" in field and field["default"] is None:
                            del field["default"]
                    models[one["title"]] = one
            schema["components"]["schemas"] = dict(sorted(models.items()))
        return schema

    return document


def _answers_of(method: str, operation: dict) -> None:
    answers = operation["responses"]
    if method not in ("get", "head"):
        answers["403"] = {"description": READ_ONLY, "content": PROBLEM}
    said = [*([NOT_JSON] if "requestBody" in operation else []), *([BAD_KEY] if method == "post" else [])]
    if said:
        answers["400"] = {"description": ", or ".join(said), "content": PROBLEM}
    if method == "post":
        operation["parameters"] = [
            *(p for p in operation.get("parameters", []) if p["name"] != "Idempotency-Key"),
            IDEMPOTENCY_KEY,
        ]
        said = answers.get("409", {}).get("description")
        answers["409"] = {
            "content": PROBLEM,
            **answers.get("409", {}),
            "description": f"{said}; or {WAITED}" if said and said != "Conflict" else WAITED,
        }
        for status, answer in answers.items():
            if status != "401" and not status.startswith("5"):
                answer.setdefault("headers", {})["Idempotent-Replayed"] = REPLAYED
    for status in ("409", "429", "503"):
        if status in answers:
            answers[status].setdefault("headers", {})["Retry-After"] = RETRY_AFTER


async def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:  # Allow: every method of the path, not only its first route's
        methods = {
            m
            for route in request.app.routes
            if route.matches(request.scope)[0] is Match.PARTIAL
            for m in getattr(route, "methods", ())
        }
        headers["Allow"] = ", ".join(sorted(methods))
    return JSONResponse({"error": exc.detail}, exc.status_code, headers=headers)


async def _refused(request: Request, exc: Exception) -> Response:
    """einmal's errors, each answered with its status (service/errors.py): 404, 422, 409, 429; one about a
    field says which (`field`, as the JSON names it) and what is wrong with it (`code`)."""
    assert isinstance(exc, EinmalError)
    headers = {"Retry-After": "5"} if exc.http_status == 503 else None
    if isinstance(exc, Busy):
        headers = {"Retry-After": str(exc.retry_after)}
    problem = {"error": exc.worded(FIXES)}
    if exc.code is not None:
        problem["code"] = exc.code
    if exc.field is not None:
        problem["field"] = exc.field
    return JSONResponse(problem, exc.http_status, headers=headers)


async def _unstorable(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": NUL}, 422)


async def _invalid(request: Request, exc: Exception) -> Response:
    """FastAPI's validation errors in the API's one shape: {"error": "where: what; …"}."""
    assert isinstance(exc, RequestValidationError)
    said = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
    return JSONResponse({"error": said[:1000]}, 422)


async def _unavailable(request: Request, exc: Exception) -> Response:
    log.warning(
        "%s %s: the database cannot be reached: %s",
        request.method,
        request.url.path,
        str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
    )
    return JSONResponse(
        {"error": "the database cannot be reached; try again shortly"}, 503, headers={"Retry-After": "5"}
    )


async def _rolled_back(request: Request, exc: Exception) -> Response:
    """The request's transaction was rolled back by PostgreSQL for a concurrent one's sake: what it wrote is undone,
    and the same request again may well pass (a route's writes are compare-and-set or upserts, as the retry of a lost
    answer needs). 503 with Retry-After, which the Idempotency-Key layer does not keep; a line in the log, for a
    deadlock is a defect of ours."""
    log.warning("%s %s: rolled back, answered 503: %s", request.method, request.url.path, type(exc).__name__)
    return JSONResponse({"error": "a concurrent change got in the way; try again"}, 503, headers={"Retry-After": "1"})
