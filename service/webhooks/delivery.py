"""One webhook delivery over HTTP: POST the signed body, read at most MAX_ANSWER bytes of the answer,
follow no redirect, all within EINMAL_WEBHOOK_TIMEOUT_SECONDS. The connection goes to an address the URL
policy allowed (policy.py): `GuardedBackend.connect_tcp` resolves the host, keeps the allowed addresses and
connects to one of them; TLS is still started with the URL's host name (SNI and the certificate's check),
and the Host header is the URL's.

    Answered(status, retry_after)   the receiver answered; 2xx delivered, 410 gone, anything else a retry
    Failed(error)                   no answer: refused by the policy, not connected, timed out, broken
"""

import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass

import anyio
import httpcore

from service.settings import Settings
from service.webhooks import policy, signing

MAX_ANSWER = 4096  # bytes of an answer's body read, for the delivery's last_error


class GuardedBackend(httpcore.AnyIOBackend):
    """Connects only to addresses the webhook policy allows, resolved and checked on each connection."""

    def __init__(self, reach: policy.Reach) -> None:
        self.reach = reach

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await policy.checked_addresses(host, port, self.reach)
        except policy.Refused as exc:
            raise httpcore.ConnectError(str(exc)) from None
        last: Exception | None = None
        for address in addresses[:3]:
            try:
                return await super().connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last


@dataclass(frozen=True)
class Answered:
    status: int
    retry_after: str | None
    excerpt: str


@dataclass(frozen=True)
class Failed:
    error: str


Outcome = Answered | Failed


def client(settings: Settings) -> httpcore.AsyncConnectionPool:
    """The pool a delivery actor posts through: no connection kept alive, so that each delivery connects,
    and so checks its address, again."""
    return httpcore.AsyncConnectionPool(
        ssl_context=ssl.create_default_context(),
        max_connections=settings.webhook_in_flight,
        max_keepalive_connections=0,
        http1=True,
        http2=False,
        network_backend=GuardedBackend(policy.Reach.of(settings)),
    )


async def post(
    pool: httpcore.AsyncConnectionPool,
    settings: Settings,
    *,
    url: str,
    event_id: str,
    body: bytes,
    secrets: list[str],
) -> Outcome:
    """POST one event to `url`, signed with `secrets`; what came of it, never an exception for the network."""
    try:
        policy.parse(url, policy.Reach.of(settings))  # the settings may have changed since it was registered
    except policy.Refused as exc:
        return Failed(f"refused by the webhook policy: {exc}")
    headers = signing.headers(event_id, int(time.time()), body, secrets)
    limit = settings.webhook_timeout_seconds
    try:
        with anyio.fail_after(limit):
            async with pool.stream(
                "POST",
                url,
                headers=headers,
                content=body,
                extensions={"timeout": {"connect": limit, "read": limit, "write": limit, "pool": limit}},
            ) as answer:
                excerpt = bytearray()
                async for chunk in answer.aiter_stream():
                    excerpt += chunk[: MAX_ANSWER - len(excerpt)]
                    if len(excerpt) >= MAX_ANSWER:
                        break
                found = dict((k.lower(), v) for k, v in answer.headers)
                retry_after = found.get(b"retry-after")
                return Answered(
                    answer.status,
                    retry_after.decode("latin-1") if retry_after is not None else None,
                    bytes(excerpt).decode("utf-8", "replace")[:200],
                )
    except TimeoutError:
        return Failed(f"no answer within {limit:g}s")
    except httpcore.TimeoutException as exc:
        return Failed(f"timed out: {type(exc).__name__}")
    except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol, OSError) as exc:
        return Failed(f"{type(exc).__name__}: {str(exc)[:200] or 'connection failed'}")
