"""What the HTTP entry points (service/web/, service/api/) share below them: the words for text PostgreSQL
cannot hold, and a request body replayed to an app behind a layer that read it first."""

from starlette.types import Message, Receive

NUL = "text with a character that cannot be stored (NUL)"  # PostgreSQL holds no NUL in text


def replay(body: bytes, receive: Receive) -> Receive:
    """An ASGI receive that gives the body read whole before, then what the connection says next (its end):
    for an app behind a middleware that had to read the body first (service/web/limits.py BoundedBody)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again
