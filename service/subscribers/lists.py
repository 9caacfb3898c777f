"""A list's title: what its public pages (sign-up form, confirmation, preference page) call it
(`einmal lists title`, PUT /api/v1/lists/{name}/title)."""

import asyncpg

from service import db
from service.subscribers import optin
from service.text import one_line

MAX_TITLE = 200


def title(value: str, option: str = "--title") -> str | None:
    """A list's title stripped; None for '' (cleared); Invalid unless it is one line of printable text."""
    return one_line(value, option, MAX_TITLE) if value.strip() else None


async def set_title(conn: asyncpg.Connection, account_id: int, list_name: str, value: str | None) -> asyncpg.Record:
    """The account's list `list_name` takes the title `value` (None: none); optin.NoList when it has no such list."""
    row = await conn.fetchrow(*db.sql("list_title_set", account_id=account_id, list_name=list_name, title=value))
    if row is None:
        raise optin.NoList(f"no list named {list_name!r}")
    return row
