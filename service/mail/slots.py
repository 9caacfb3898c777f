"""Worker threads for renders of templates, shared between accounts (docs/design.md#templates).

A template's render is bounded (service/mail/sandbox.py: about 0.1 s at most for each of a message's templates)
but not free, so it runs in a worker thread, not on the event loop: at most ``threads`` at a time in a process,
and at most ``share`` of them for one account, so one account's costly templates leave the others' renders
their room. What waits for a slot waits in its account's line, not in a queue of its own.
"""

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")

THREADS = 2  # render threads of a process (the sender's; the API's previews and checks have their own)
SHARE = 1  # of them at most for one account


class RenderSlots:
    """``await slots.run(account_id, function, *args)``: ``function(*args)`` in a worker thread, in the
    account's share of the threads."""

    def __init__(self, threads: int = THREADS, share: int = SHARE) -> None:
        self.size, self.share = threads, min(share, threads)
        self.threads: anyio.CapacityLimiter | None = None  # made in the event loop, at the first render
        self.accounts: dict[int, anyio.CapacityLimiter] = {}  # only the accounts rendering or waiting now

    async def run(self, account_id: int, function: Callable[..., T], *args: object) -> T:
        async with self.turn(account_id) as threads:
            return await anyio.to_thread.run_sync(function, *args, limiter=threads)

    @asynccontextmanager
    async def turn(self, account_id: int) -> AsyncIterator[anyio.CapacityLimiter]:
        """The account's place among the threads, held for the block: it yields the threads' limiter, for the
        worker threads the block runs (a trial render that reads and renders in one call)."""
        if self.threads is None:
            self.threads = anyio.CapacityLimiter(self.size)
        line = self.accounts.get(account_id)
        if line is None:
            line = self.accounts[account_id] = anyio.CapacityLimiter(self.share)
        try:
            async with line:
                yield self.threads
        finally:
            if line.borrowed_tokens == 0 and line.statistics().tasks_waiting == 0:
                self.accounts.pop(account_id, None)
