"""Fixtures of the sending tests."""

import pytest

from service import db
from service.settings import Settings
from tests.support.wiring import wiring


@pytest.fixture
async def the_builder(dsn: str):
    """A recipient builder (actors/builder.py) on a pool of its own."""
    pool = await db.create_pool(dsn, size=2)
    yield wiring(Settings(database_url=dsn), pool, dsn).builder()
    await pool.close()
