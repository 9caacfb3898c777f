"""Listening sockets for the node's servers (HTTP, inbound mail), bound once before the actors start."""

import socket

from service.errors import EinmalError
from service.settings import split_address


def bind(address: str, variable: str, *, backlog: int | None = None) -> socket.socket:
    """A socket bound to host:port (port 0: a free one), listening when `backlog` is given;
    EinmalError naming `variable` and the address if it cannot be."""
    host, port = split_address(address)
    try:
        family, kind, proto, _, where = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(where)
            if backlog is not None:
                sock.listen(backlog)
        except OSError:
            sock.close()
            raise
    except OSError as exc:
        raise EinmalError(f"{variable}: cannot listen on {address}: {exc.strerror or exc}") from None
    return sock
