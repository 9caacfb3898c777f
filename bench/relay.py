"""A relay that takes time: an SMTP server on loopback that answers the end of DATA after a
delay uniform in 0–100 ms (seeded), in a process of its own so that its event loop does not
compete with the one measuring.

`python -m bench.relay PORT SEED` serves until killed. Like `smtp-sink -c`, it prints
`sess=S quit=Q mesg=M` on its standard output after every accepted message and every
session's end, so the bench counts what arrived with the same reader (bench/sink.py). It
offers PIPELINING, as Postfix and the large relays do, and reads pipelined commands in order.
"""

import asyncio
import random
import sys

from bench.sink import Sink

MAX_DELAY = 0.1  # seconds: the end of DATA is answered after uniform(0, MAX_DELAY)
_EHLO = b"250-relay.bench\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250 SIZE 10240000\r\n"


class Counter:
    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.sessions = self.quits = self.messages = 0

    def show(self) -> None:
        sys.stdout.write(f"sess={self.sessions} quit={self.quits} mesg={self.messages}\n")
        sys.stdout.flush()


async def session(counter: Counter, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"220 relay.bench ESMTP\r\n")
    try:
        while line := await reader.readline():
            verb = line[:4].upper()
            if verb in (b"EHLO", b"LHLO"):
                writer.write(_EHLO)
            elif verb == b"DATA":
                writer.write(b"354 go ahead\r\n")
                await reader.readuntil(b"\r\n.\r\n")
                await asyncio.sleep(counter.random.uniform(0, MAX_DELAY))
                writer.write(b"250 2.0.0 Ok: queued\r\n")
                counter.messages += 1
                counter.show()
            elif verb == b"QUIT":
                writer.write(b"221 2.0.0 Bye\r\n")
                counter.quits += 1
                break
            else:  # HELO, MAIL, RCPT, RSET, NOOP: all accepted
                writer.write(b"250 2.0.0 Ok\r\n")
            await writer.drain()
        await writer.drain()
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass  # the client went away
    finally:
        writer.close()
        counter.sessions += 1
        counter.show()


async def serve(port: int, seed: int) -> None:
    counter = Counter(seed)
    server = await asyncio.start_server(
        lambda r, w: session(counter, r, w), "127.0.0.1", port, limit=16 * 1024 * 1024, backlog=256
    )
    async with server:
        await server.serve_forever()


class Relay(Sink):
    """The relay as a subprocess on 127.0.0.1, counted like smtp-sink: `with Relay(seed) as relay:`."""

    def __init__(self, seed: int) -> None:
        super().__init__(sys.executable)
        self.seed = seed

    def command(self) -> list[str]:
        return [self.path, "-m", "bench.relay", str(self.port), str(self.seed)]


if __name__ == "__main__":
    if len(sys.argv) != 3 or not all(arg.isdigit() for arg in sys.argv[1:]):
        print("usage: python -m bench.relay PORT SEED", file=sys.stderr)
        sys.exit(2)
    try:
        asyncio.run(serve(int(sys.argv[1]), int(sys.argv[2])))
    except KeyboardInterrupt:
        pass
