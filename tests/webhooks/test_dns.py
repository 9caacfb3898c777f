"""The URL policy against names served by a real DNS server (knotd on loopback, EINMAL_DNS_SERVERS): a name
with a private address is refused at registration, and a name whose address changed to loopback after it was
registered (DNS rebinding) is refused at delivery, before any connection."""

from contextlib import nullcontext

import pytest

from service.errors import Invalid
from service.settings import Settings
from service.subscribers import suppressions
from service.webhooks import endpoints, policy
from tests.support.dns_server import dns_server
from tests.support.webhook_receiver import Receiver
from tests.support.webhooks import running_actor, wait_until

pytestmark = pytest.mark.anyio


async def test_a_name_is_checked_at_registration_and_again_at_delivery(dsn, conn, tmp_path) -> None:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    async with Receiver() as receiver:
        url = f"https://hooks.einmal.test:{receiver.port}/h"
        before = ["hooks A 93.184.216.34", "inside A 10.0.0.5", "both A 93.184.216.34", "both A 192.168.1.1"]
        with dns_server(tmp_path / "before", {"einmal.test": before}) as servers:
            settings = Settings(dns_servers=servers)
            made = await endpoints.add(
                lambda: nullcontext(conn), policy.Reach.of(settings), account_id=account, url=url
            )
            for refused in ("https://inside.einmal.test/h", "https://both.einmal.test/h"):
                with pytest.raises(Invalid, match="non-public"):
                    await endpoints.add(
                        lambda: nullcontext(conn), policy.Reach.of(settings), account_id=account, url=refused
                    )
            with pytest.raises(Invalid, match="does not resolve"):
                await endpoints.add(
                    lambda: nullcontext(conn),
                    policy.Reach.of(settings),
                    account_id=account,
                    url="https://nothing.einmal.test/h",
                )
        await suppressions.suppress(conn, account, ["ann@example.org"], "unsubscribe")
        with dns_server(tmp_path / "after", {"einmal.test": ["hooks A 127.0.0.1"]}) as servers:
            async with running_actor(dsn, dns_servers=servers, webhook_allow_http_loopback=False):
                await wait_until(conn, "SELECT bool_and(attempts >= 2) FROM einmal.webhook_deliveries")
    assert receiver.connections == 0
    row = await conn.fetchrow("SELECT endpoint_id, state, last_error FROM einmal.webhook_deliveries")
    assert row["endpoint_id"] == made.id and row["state"] in ("pending", "parked")
    assert "hooks.einmal.test resolves only to addresses the webhook policy refuses (127.0.0.1)" in row["last_error"]


async def test_a_name_whose_aaaa_carries_a_private_address_is_refused_at_registration_and_delivery(
    dsn, conn, tmp_path
) -> None:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    async with Receiver() as receiver:
        url = f"https://hooks.einmal.test:{receiver.port}/h"
        records = ["nat64 AAAA 64:ff9b::a00:1", "sixtofour AAAA 2002:a9fe:a9fe::1", "site AAAA fec0::5"]
        with dns_server(tmp_path / "before", {"einmal.test": [*records, "hooks A 93.184.216.34"]}) as servers:
            settings = Settings(dns_servers=servers)
            for name in ("nat64", "sixtofour", "site"):
                with pytest.raises(Invalid, match="non-public"):
                    await endpoints.add(
                        lambda: nullcontext(conn),
                        policy.Reach.of(settings),
                        account_id=account,
                        url=f"https://{name}.einmal.test/h",
                    )
            await endpoints.add(lambda: nullcontext(conn), policy.Reach.of(settings), account_id=account, url=url)
        await suppressions.suppress(conn, account, ["ann@example.org"], "unsubscribe")
        with dns_server(tmp_path / "after", {"einmal.test": ["hooks AAAA 64:ff9b::7f00:1"]}) as servers:
            async with running_actor(dsn, dns_servers=servers, webhook_allow_http_loopback=False):
                await wait_until(conn, "SELECT bool_and(attempts >= 2) FROM einmal.webhook_deliveries")
    assert receiver.connections == 0
    error = await conn.fetchval("SELECT last_error FROM einmal.webhook_deliveries")
    assert "resolves only to addresses the webhook policy refuses (64:ff9b::7f00:1)" in error
