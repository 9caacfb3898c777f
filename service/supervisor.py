"""One-for-one supervision with a restart limit, after OTP.

Each child is started in order and counts as started only once it reports
ready (`task_status.started()`). A child that fails is restarted alone after
an exponential backoff. More than `intensity` failures within `period`
seconds stop the supervisor: the process exits non-zero, so that systemd or
the container runtime restarts it whole.
"""

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
from anyio.abc import TaskStatus

from service.errors import EinmalError, leaves

log = logging.getLogger("einmal.supervisor")


class GaveUp(EinmalError):
    pass


@dataclass
class Child:
    name: str
    run: Callable[..., Awaitable[None]]  # async def run(*, task_status) -> None


def describe(exc: BaseException) -> str:
    exc = leaves(exc)[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Supervisor:
    def __init__(self, intensity: int = 10, period: float = 60.0,
                 backoff: float = 0.2, max_backoff: float = 5.0) -> None:
        self.intensity, self.period = intensity, period
        self.backoff, self.max_backoff = backoff, max_backoff
        self.restarts: dict[str, int] = {}

    async def run(self, children: list[Child]) -> None:
        async with anyio.create_task_group() as tg:
            for child in children:
                await tg.start(self._supervise, child)

    async def _supervise(self, child: Child, *, task_status: TaskStatus[None]) -> None:
        failures: deque[float] = deque()
        delay = self.backoff
        reported = False
        while True:
            began = time.monotonic()
            try:
                async with anyio.create_task_group() as tg:
                    await tg.start(child.run)
                    if not reported:
                        reported = True
                        task_status.started()
                return
            except Exception as exc:  # an actor's failure of any kind is a restart
                now = time.monotonic()
                failures.append(now)
                while failures and failures[0] < now - self.period:
                    failures.popleft()
                if len(failures) > self.intensity:
                    raise GaveUp(f"actor {child.name} failed {len(failures)} times within "
                                 f"{self.period:g}s, giving up: {describe(exc)}") from exc
                if now - began > self.period:
                    delay = self.backoff
                self.restarts[child.name] = self.restarts.get(child.name, 0) + 1
                log.warning("actor %s failed (%s); restarting in %.1fs", child.name, describe(exc), delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, self.max_backoff)
