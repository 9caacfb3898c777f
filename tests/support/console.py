"""Helpers for the console's tests: users made through the service functions, and a client that signs in
over real HTTP as a browser does (the sign-in page's token, its cookie, the session's cookie)."""

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import httpx

from service.users import users

PASSWORD = "correct horse battery"
TOKEN = re.compile(r'name="form_token" value="([^"]+)"')


async def user(conn: asyncpg.Connection, name: str, account: str | None = None, password: str = PASSWORD) -> int:
    return await users.add(conn, name=name, account=account, password=password, actor="test")


def form_token(page: str) -> str:
    found = TOKEN.search(page)
    assert found is not None, page[:500]
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, name: str, password: str = PASSWORD, **headers: str) -> httpx.Response:
    """The sign-in form fetched and sent: the answer to the POST (303 to the dashboard when signed in)."""
    page = await client.get("/console/login")
    assert page.status_code == 200, page.text
    data = {"form_token": form_token(page.text), "name": name, "password": password}
    return await client.post("/console/login", data=data, headers={"Origin": str(client.base_url), **headers})


@asynccontextmanager
async def signed_in(base: str, name: str, password: str = PASSWORD) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base) as client:
        answer = await sign_in(client, name, password)
        assert answer.status_code == 303 and answer.headers["location"] == "/console/", answer.text
        yield client


async def page_token(client: httpx.AsyncClient) -> str:
    """The session's form token, as the dashboard's sign-out form carries it."""
    return form_token((await client.get("/console/")).text)
