"""A node's wiring without its supervisor, for tests that drive one actor, or a few, by hand."""

from typing import cast

import asyncpg

from actors.sections import Sections
from actors.wiring import NodeWiring
from actors.writer import Recording
from service.settings import Settings


def wiring(settings: Settings, pool: asyncpg.Pool | None = None, dsn: str = "") -> NodeWiring:
    """The wires and sections `einmal run` would build; `pool` None for what needs none."""
    return NodeWiring.of(Sections.of(settings, dsn), cast(asyncpg.Pool, pool))


def recording(settings: Settings) -> Recording:
    """What the writer's statements need besides a connection: the domains' pauses, a journal, metrics."""
    return wiring(settings).recording()
