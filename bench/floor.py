"""The floor of an HTTP front in Python on this machine: an ASGI app of a few lines that answers each
`PUT /…/{email}` with the one statement of the bare loop, served by Uvicorn with einmal's HTTP protocol
(h11) and event loop, on a pool of einmal's HTTP pool size. No authentication, validation or answer
beyond the address: what any Python server with einmal's parts pays before doing anything of its own.

`python -m bench.floor` serves it on EINMAL_HTTP_ADDRESS, for the account BENCH_ACCOUNT of
EINMAL_DATABASE_URL, until it is terminated."""

import json
import os

import asyncpg
import uvicorn

from actors.node import HTTP_POOL_SIZE
from service.addresses import email_key

# the statement of the bare loop too (bench/api.py)
UPSERT = (
    "INSERT INTO einmal.subscribers (account_id, email, email_lower, name, attributes) "
    "VALUES ($1, $2, $3, $4, $5::jsonb) ON CONFLICT (account_id, email) DO UPDATE "
    "SET name = excluded.name, attributes = einmal.subscribers.attributes || excluded.attributes"
)


def app(dsn: str, account_id: int):
    pool: list[asyncpg.Pool] = []

    async def serve(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "PUT":  # GET /healthz, while the bench waits for the server
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
            return await send({"type": "http.response.body", "body": b""})
        if not pool:
            pool.append(await asyncpg.create_pool(dsn, min_size=0, max_size=HTTP_POOL_SIZE))
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        fields, email = json.loads(body), scope["path"].rsplit("/", 1)[1]
        await pool[0].execute(
            UPSERT, account_id, email, email_key(email), fields["name"], json.dumps(fields["attributes"])
        )
        answer = json.dumps({"email": email}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))],
            }
        )
        await send({"type": "http.response.body", "body": answer})

    return serve


def main() -> None:
    host, port = os.environ["EINMAL_HTTP_ADDRESS"].rsplit(":", 1)
    try:
        import uvloop  # noqa: F401  einmal runs on it when it is installed (service/cli/einmal.py)

        loop = "uvloop"
    except ImportError:
        loop = "asyncio"
    uvicorn.run(
        app(os.environ["EINMAL_DATABASE_URL"], int(os.environ["BENCH_ACCOUNT"])),
        host=host,
        port=int(port),
        http="h11",
        loop=loop,
        lifespan="off",
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
