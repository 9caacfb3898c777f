"""One-for-one supervision with a restart limit, after OTP.

Each child is started in order and counts as started only once it reports
ready (`task_status.started()`). A child that fails is restarted alone after
an exponential backoff. More than `intensity` failures within `period`
seconds stop the supervisor: the process exits non-zero, so that systemd or
the container runtime restarts it whole.

A failure that `passing(exc)` calls passing (the database is unreachable,
service/db/__init__.py `unreachable`) is restarted the same way, with the backoff
capped at `max_backoff`, but does not count toward the limit: a node rides
out an outage of any length. It is logged once when it begins and then once
every `quiet` seconds while it lasts, not at every try.

`states` tells readiness what each child is doing (starting, running,
restarting); `on_restart(name)` is called for every restart (the metrics
count them).
"""

import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskStatus

from service.errors import EinmalError, leaves

log = logging.getLogger("einmal.supervisor")


class GaveUp(EinmalError):
    pass


@dataclass
class Child:
    name: str
    run: Callable[..., Coroutine[Any, Any, None]]  # async def run(*, task_status) -> None


def describe(exc: BaseException) -> str:
    exc = leaves(exc)[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Supervisor:
    def __init__(
        self,
        intensity: int = 10,
        period: float = 60.0,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        on_restart: Callable[[str], None] | None = None,
        passing: Callable[[BaseException], bool] = lambda exc: False,
        quiet: float = 30.0,
    ) -> None:
        self.intensity, self.period = intensity, period
        self.backoff, self.max_backoff = backoff, max_backoff
        self.passing, self.quiet = passing, quiet
        self.restarts: dict[str, int] = {}
        self.states: dict[str, str] = {}  # child name -> starting | running | restarting
        self.on_restart = on_restart

    def not_running(self) -> str | None:
        """The first child that is not running, as 'name (state)'; None when all are."""
        for name, state in self.states.items():
            if state != "running":
                return f"{name} ({state})"
        return None

    async def run(self, children: list[Child]) -> None:
        # every child is starting from now: the children are started one after another, and one not yet begun
        # must keep the node unready as much as one starting (/readyz reads `waiting`)
        self.states.update((child.name, "starting") for child in children)
        async with anyio.create_task_group() as tg:
            for child in children:
                await tg.start(self._supervise, child)

    async def _supervise(self, child: Child, *, task_status: TaskStatus[None]) -> None:
        failures: deque[float] = deque()
        delay = self.backoff
        reported = False
        outage: list[float] = []  # while failures pass: when the first came, when one was last logged, tries
        self.states[child.name] = "starting"
        while True:
            began = time.monotonic()
            try:
                async with anyio.create_task_group() as tg:
                    await tg.start(child.run)
                    self.states[child.name] = "running"
                    if outage:
                        log.info(
                            "actor %s running again after %.0fs and %d tries",
                            child.name,
                            time.monotonic() - outage[0],
                            outage[2],
                        )
                        outage = []
                    if not reported:
                        reported = True
                        task_status.started()
                return
            except Exception as exc:  # an actor's failure of any kind is a restart
                now = time.monotonic()
                if now - began > self.period:
                    delay = self.backoff
                self.restarts[child.name] = self.restarts.get(child.name, 0) + 1
                self.states[child.name] = "restarting"
                if self.on_restart is not None:
                    self.on_restart(child.name)
                if self.passing(exc):
                    if not outage:
                        outage = [now, now, 1]
                        log.warning(
                            "actor %s failed (%s); restarting every %gs at most until it runs again",
                            child.name,
                            describe(exc),
                            self.max_backoff,
                        )
                    else:
                        outage[2] += 1
                        if now - outage[1] >= self.quiet:
                            outage[1] = now
                            log.warning(
                                "actor %s still failing after %.0fs and %d tries (%s)",
                                child.name,
                                now - outage[0],
                                outage[2],
                                describe(exc),
                            )
                else:
                    failures.append(now)
                    while failures and failures[0] < now - self.period:
                        failures.popleft()
                    if len(failures) > self.intensity:
                        raise GaveUp(
                            f"actor {child.name} failed {len(failures)} times within "
                            f"{self.period:g}s, giving up: {describe(exc)}"
                        ) from exc
                    log.warning("actor %s failed (%s); restarting in %.1fs", child.name, describe(exc), delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, self.max_backoff)
