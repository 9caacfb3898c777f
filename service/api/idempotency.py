"""Idempotency-Key on every POST of /api/v1 (docs/design.md#api): the same key with the same request gets
the first answer (status and body) again, without a second effect, concurrently too; the same key with
another request is 422. Built like the inbound events (docs/design.md#inbound-events): claim first, then apply.

The claim is a row of einmal.api_requests, keyed by the API key's hash and the Idempotency-Key, inserted
before the request runs. The request that inserted it runs and stores its answer; a request that finds
the row waits for the answer (up to WAIT_SECONDS, then 409 with Retry-After) and returns it, marked
`Idempotent-Replayed: true`. An answer of 5xx, 401 or 429 is not kept (the claim is removed, a retry runs
again; an answer marked `Cache-Control: no-store`, a new key, is kept as a 409 that says it was done, so
that no secret is stored). A claim left without an answer for TAKEOVER_SECONDS (its node died mid-request)
is taken over by the next retry of the same request, which runs it again: the routes' own writes are compare-and-set or
upserts, so a second run changes nothing the first one made; only the same request takes a claim over, never
another with the key. Keys are kept EINMAL_MESSAGE_KEY_HOURS from their request: the window of a transactional
message's key too (docs/design.md#messages), so that one window and one comparison (this one) hold for both.

The request is its path, its query and its body as JSON, canonical (keys sorted, no insignificant
whitespace), so that a retry that serialised the same JSON otherwise is the same request; a body that is
not JSON is taken as its bytes. The claim comes after the key is found (deps.KeyFirst): a request without a
valid key writes no row."""

import hashlib
import json

import anyio
import asyncpg
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import db
from service.accounts import keys
from service.asgi import replay

HEADER = "idempotency-key"
WAIT_SECONDS = 10.0
TAKEOVER_SECONDS = 60.0
POLL_SECONDS = 0.05
MAX_KEY = 200
SECRET_NOT_KEPT = (
    "this Idempotency-Key's request was done; its answer held a secret shown once, which is not "
    "kept: it is not shown again"
)


class Idempotent:
    """ASGI middleware over the API; the body was read whole by BoundedBody before it."""

    def __init__(self, app: ASGIApp, pool: asyncpg.Pool, window_seconds: float) -> None:
        self.app, self.pool, self.window_seconds = app, pool, window_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        idem = request.headers.get(HEADER)
        if scope["type"] != "http" or scope["method"] != "POST" or idem is None:
            return await self.app(scope, receive, send)
        if not (0 < len(idem) <= MAX_KEY and idem.isascii() and idem.isprintable()):
            return await _json(send, 400, {"error": f"Idempotency-Key: 1 to {MAX_KEY} printable ASCII characters"})
        body = await request.body()  # already read and bounded: replayed from memory
        authorization = request.headers.get("authorization", "")
        key_hash = keys.digest(authorization)
        request_hash = hashlib.sha256(
            b"\0".join([scope["path"].encode(), scope.get("query_string", b""), canonical(body)])
        ).digest()
        pool = self.pool  # a statement at a time: a waiter holds no connection the runner needs
        claim = db.sql(
            "idempotency_claim",
            key_hash=key_hash,
            idem_key=idem,
            request_hash=request_hash,
            window_seconds=self.window_seconds,
            takeover_seconds=TAKEOVER_SECONDS,
        )
        if await pool.fetchval(*claim, timeout=WAIT_SECONDS):
            return await self._run(scope, replay(body, receive), send, key_hash, idem)
        with anyio.move_on_after(WAIT_SECONDS):
            while True:
                kept = await pool.fetchrow(
                    *db.sql("idempotency_get", key_hash=key_hash, idem_key=idem), timeout=WAIT_SECONDS
                )
                if kept is None:  # released by a failed first run: run this one
                    if await pool.fetchval(*claim, timeout=WAIT_SECONDS):
                        return await self._run(scope, replay(body, receive), send, key_hash, idem)
                elif bytes(kept["request_hash"]) != request_hash:
                    return await _json(send, 422, {"error": "this Idempotency-Key was used for another request"})
                elif kept["status"] is not None:
                    headers = [(b"content-type", kept["content_type"].encode()), (b"idempotent-replayed", b"true")]
                    return await _answer(send, kept["status"], headers, bytes(kept["body"]))
                await anyio.sleep(POLL_SECONDS)
        await _json(
            send, 409, {"error": "a request with this Idempotency-Key is still running"}, [(b"retry-after", b"1")]
        )

    async def _run(self, scope: Scope, receive: Receive, send: Send, key_hash: bytes, idem: str) -> None:
        """Run the request that holds the claim; keep its answer, or release the claim."""
        start: Message = {}
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        status = None
        try:
            await self.app(scope, receive, capture)
            status = start.get("status")
        finally:
            keep = status is not None and status < 500 and status not in (401, 429)
            headers = dict(start.get("headers", []))
            content_type = headers.get(b"content-type", b"application/json").decode("latin-1")
            body = b"".join(chunks)
            if keep and headers.get(b"cache-control") == b"no-store":  # a secret (a new key): no copy is kept
                status, content_type, body = 409, "application/json", json.dumps({"error": SECRET_NOT_KEPT}).encode()
            with anyio.CancelScope(shield=True):
                await self.pool.execute(
                    *db.sql(
                        "idempotency_answer",
                        key_hash=key_hash,
                        idem_key=idem,
                        status=status if keep else None,
                        content_type=content_type,
                        body=body,
                        window_seconds=self.window_seconds,
                    ),
                    timeout=WAIT_SECONDS,
                )


def canonical(body: bytes) -> bytes:
    """What of a body makes it the same request: its JSON with the keys sorted and no insignificant
    whitespace; a body that is not JSON, its bytes (each marked, so that neither is taken for the other)."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # not JSON (nor UTF-8), or nested past what the parser takes
        return b"bytes\0" + body
    try:
        return b"json\0" + json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True
        ).encode("utf-8", "surrogatepass")
    except (ValueError, RecursionError):
        return b"bytes\0" + body


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, value: dict, headers: list | None = None) -> None:
    await _answer(send, status, [(b"content-type", b"application/json"), *(headers or [])], json.dumps(value).encode())
