"""A UDP DNS relay on loopback that counts the queries it is asked (their names and types) and passes each to
a real server (tests/support/dns_server.py), or, without one, a name server that never answers: it reads every
query and replies to none.

    with dns_server(tmp_path, zones) as at, counting(at) as relay:
        env = {"EINMAL_DNS_SERVERS": relay.address}
        ...
        assert len(relay.queries) <= 31
"""

import selectors
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import dns.exception
import dns.message
import dns.rdatatype


class Relay:
    def __init__(self, upstream: str | None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.upstream = socket.socket(socket.AF_INET, socket.SOCK_DGRAM) if upstream else None
        if self.upstream is not None and upstream is not None:
            host, _, port = upstream.rpartition(":")
            self.upstream.connect((host, int(port)))
        self.queries: list[tuple[str, str]] = []  # (name, type), in the order asked
        self.waiting: dict[int, tuple[str, int]] = {}  # query id -> who asked
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def asked(self, kind: str | None = None) -> list[str]:
        with self.lock:
            return [name for name, k in self.queries if kind is None or k == kind]

    def run(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.sock, selectors.EVENT_READ)
            if self.upstream is not None:
                selector.register(self.upstream, selectors.EVENT_READ)
            while not self.stop.is_set():
                for ready, _ in selector.select(timeout=0.1):
                    if ready.fileobj is self.sock:
                        self._query(*self.sock.recvfrom(65535))
                    elif self.upstream is not None:
                        self._answer(self.upstream.recv(65535))

    def _query(self, data: bytes, client: tuple[str, int]) -> None:
        try:
            question = dns.message.from_wire(data).question[0]
            asked = (question.name.to_text(omit_final_dot=True).lower(), dns.rdatatype.to_text(question.rdtype))
        except (dns.exception.DNSException, IndexError):
            asked = ("?", "?")
        with self.lock:
            self.queries.append(asked)
        if self.upstream is not None and len(data) >= 2:
            self.waiting[int.from_bytes(data[:2], "big")] = client
            self.upstream.send(data)

    def _answer(self, data: bytes) -> None:
        client = self.waiting.pop(int.from_bytes(data[:2], "big"), None) if len(data) >= 2 else None
        if client is not None:
            self.sock.sendto(data, client)


@contextmanager
def counting(upstream: str | None = None) -> Iterator[Relay]:
    """A counting relay to `upstream` (`127.0.0.1:port`); None: a server that never answers."""
    relay = Relay(upstream)
    thread = threading.Thread(target=relay.run, daemon=True)
    thread.start()
    try:
        yield relay
    finally:
        relay.stop.set()
        thread.join(timeout=5)
        relay.sock.close()
        if relay.upstream is not None:
            relay.upstream.close()
