"""CPU time per message: PostgreSQL's, and the node's own, read from /proc.

PostgreSQL's is the CPU time (utime + stime in /proc/<pid>/stat) of the server's client
backends connected to the bench database, found by their pid in pg_stat_activity, from the
approval to the campaign's `sent`. The bench's own connection is left out, and so are the
server's background processes (WAL writer, checkpointer, autovacuum): this is the work of
the statements the nodes send. It needs the server on this machine (the embedded one or
127.0.0.1); elsewhere it reads "not measured".

The campaign runs (bench/send.py) measure through this module; `python -m bench.dbcost`
prints what they measured.
"""

import os
from pathlib import Path

import asyncpg

from bench import database

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process, in seconds; None when it is not a process of this machine."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # fields 14 and 15 of proc(5)


def _postgres(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().startswith("postgres")
    except OSError:
        return False


class Backends:
    """The CPU time of the client backends of one database, between `start()` and `stop()`."""

    def __init__(self, server: str, name: str) -> None:
        self.server, self.name = server, name
        self.local = True
        self.base: dict[int, float] = {}  # CPU at start; 0 for a backend that started later
        self.last: dict[int, float] = {}
        self.conn: asyncpg.Connection | None = None

    async def start(self, exclude: set[int]) -> None:
        self.exclude = exclude
        self.conn = await database.admin(self.server)  # another database: not in the bench's counts
        self.local = _postgres(await self.conn.fetchval("SELECT pg_backend_pid()"))
        await self.sample()
        self.base = dict(self.last)

    async def sample(self) -> None:
        pids = [
            r["pid"]
            for r in await self.conn.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'", self.name
            )
        ]
        for pid in pids:
            if pid in self.exclude:
                continue
            if self.local and (seconds := cpu_seconds(pid)) is not None:  # None: it has just exited
                self.last[pid] = seconds

    async def stop(self) -> float | None:
        """CPU seconds of the backends since `start()`, None when the server is not local."""
        await self.sample()
        if not self.local or not self.last:
            return None
        return sum(seconds - self.base.get(pid, 0.0) for pid, seconds in self.last.items())

    async def close(self) -> None:
        if self.conn is not None and not self.conn.is_closed():
            await self.conn.close()
