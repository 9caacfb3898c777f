"""A path with a trailing slash is not one of the surface's paths: 404 on the site and under /api/v1, never
a redirect. Starlette's default redirect (307) names the request's Host header as its site, so a hostile
Host sent the client — with a POST's body repeated, and the link's token in the URL — elsewhere."""

import asyncpg
import httpx
import pytest

from tests.support.web import http_server, subscriber, token
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio


async def test_a_trailing_slash_is_404_never_a_redirect_to_the_host_header(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await subscriber(conn)
    key = auth(make_key(dsn, "acme"))
    link = token(ids)
    asked = [
        ("POST", f"/unsubscribe/?token={link}"),
        ("GET", f"/unsubscribe/?token={link}"),
        ("GET", f"/confirm/?token={link}"),
        ("POST", f"/confirm/?token={link}"),
        ("GET", "/healthz/"),
        ("GET", "/metrics/"),
        ("POST", "/inbound/postmark/"),
        ("GET", "/lists/1/subscribe/"),
        ("POST", "/api/v1/campaigns/"),
        ("GET", "/api/v1/campaigns/"),
        ("GET", "/api/v1/subscribers/"),
        ("PUT", "/api/v1/lists/news/"),
        ("GET", "/api/v1/openapi.json/"),
        ("POST", "/api/v1/subscribe/"),
    ]
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=base, follow_redirects=False) as client:
        for method, url in asked:
            answer = await client.request(
                method, url, data={"List-Unsubscribe": "One-Click"}, headers={**key, "Host": "evil.example"}
            )
            assert answer.status_code == 404, (method, url, answer.status_code, answer.headers)
            assert "location" not in answer.headers and "evil" not in answer.text, (method, url)
            if url.startswith("/api/v1"):
                assert answer.json() == {"error": "Not Found"}, (method, url, answer.text)
        # the paths without the slash are served as before
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/api/v1/campaigns", headers=key)).status_code == 200
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions") == 0
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns WHERE name = 'Spring'") == 0
