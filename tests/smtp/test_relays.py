"""Several relays (EINMAL_SMTP_URLS): their URLs, the connections shared out by weight, and failover when
one of them goes away mid-campaign."""

from collections import Counter
from pathlib import Path

import anyio
import asyncpg
import pytest

from service.errors import ConfigError
from service.relays import Relay, parse_urls, share
from service.settings import load
from tests.support.pipeline import approve, counts, node_env, seed, start_node, stop_node, wait_status
from tests.support.smtp_servers import FaultServer


def test_relay_urls_name_host_port_tls_credentials_and_weight() -> None:
    relays = parse_urls(
        "smtp://us%40er:p%2Css@relay1.example:587?tls=starttls&weight=3, smtps://relay2.example,"
        "smtp://[::1]:2525?ca_file=/etc/ca.pem"
    )
    assert relays == [
        Relay("relay1.example", 587, "starttls", "us@er", "p,ss", None, 3),
        Relay("relay2.example", 465, "tls", None, None, None, 1),
        Relay("::1", 2525, "none", None, None, "/etc/ca.pem", 1),
    ]
    assert "p,ss" not in repr(relays[0]), "a password is never shown"


@pytest.mark.parametrize(
    ("urls", "says"),
    [
        ("http://relay:25", "must start with smtp:// or smtps://"),
        ("smtp://relay:99999", "port from 1 to 65535"),
        ("smtp://relay:25?weight=0", "weight= must be a whole number"),
        ("smtp://relay:25?tls=tls", "tls= must be none or starttls for smtp://"),
        ("smtp://relay:25?pool=3", "unknown option: pool"),
        ("smtp://relay:25/path", "nothing after the port"),
        (" , ", "one or more smtp:// or smtps:// URLs"),
    ],
)
def test_a_bad_relay_url_is_one_line_that_never_shows_the_password(
    monkeypatch: pytest.MonkeyPatch, urls: str, says: str
) -> None:
    monkeypatch.setenv("EINMAL_SMTP_URLS", urls.replace("relay", "user:s3cret@relay", 1))
    with pytest.raises(ConfigError) as caught:
        load()
    message = str(caught.value)
    assert message.startswith("EINMAL_SMTP_URLS: ") and says in message and "\n" not in message, message
    assert "s3cret" not in message


def test_connections_are_shared_out_by_weight() -> None:
    relays = [Relay("a", 25, weight=3), Relay("b", 25, weight=1)]
    assert Counter(share(relays, 20)) == {0: 15, 1: 5}
    assert share(relays, 4) == [0, 0, 1, 0] or Counter(share(relays, 4)) == {0: 3, 1: 1}
    assert share([Relay("a", 25)], 3) == [0, 0, 0]


@pytest.mark.anyio
async def test_a_relay_killed_mid_campaign_leaves_the_rest_to_the_other(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    recipients, connections = 300, 4
    campaign = await seed(conn, [f"f{i}@example.com" for i in range(recipients)])
    with FaultServer() as first, FaultServer() as second:
        for server in (first, second):
            server.inject("data_end", None, delay=0.02)  # a relay that takes a moment: the kill lands mid-DATA
        urls = f"smtp://127.0.0.1:{first.port},smtp://127.0.0.1:{second.port}"
        env = node_env(dsn, first.port, EINMAL_SMTP_URLS=urls, EINMAL_SMTP_CONNECTIONS=str(connections))
        node = start_node(env, tmp_path / "node.log")
        try:
            await approve(conn, campaign)
            with anyio.fail_after(30):
                await first.arrived(40)
            first.stop()  # every connection to it dropped, and no new one accepted
            await wait_status(conn, campaign, "sent", timeout=60)
        finally:
            assert await stop_node(node) == 0
        taken = first.messages + second.messages
    final = await counts(conn, campaign)
    assert final.get("in_doubt", 0) <= connections // 2, f"{final}: more in doubt than connections to the relay"
    assert final["sent"] + final.get("in_doubt", 0) == recipients, final
    by_id = Counter(m.message_id for m in taken)
    assert len(by_id) >= final["sent"] and max(by_id.values()) == 1, "no message went out twice"
    assert len(second.messages) > len(first.messages) > 0
    log = (tmp_path / "node.log").read_text()
    assert f"SMTP 127.0.0.1:{first.port}" in log, "the relay that went away is named"
