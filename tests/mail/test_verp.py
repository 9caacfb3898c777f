"""VERP: with EINMAL_RETURN_PATH each message's envelope sender names its send row, signed."""

import asyncpg
import pytest

from service.mail import verp
from service.settings import Settings
from tests.support.pipeline import approve, node_settings, running_node, seed, wait_status

pytestmark = pytest.mark.anyio

SECRET = "k-verp-1"


async def test_each_envelope_sender_carries_a_token_that_verifies_and_names_its_row(
    conn: asyncpg.Connection, dsn: str, smtp_server
) -> None:
    campaign = await seed(conn, [f"v{i}@example.com" for i in range(12)])
    settings = node_settings(dsn, smtp_server.port, return_path="bounces@example.org", return_path_secret=SECRET)
    async with running_node(settings):
        await approve(conn, campaign)
        await wait_status(conn, campaign, "sent")

    rows = {
        r["email"]: r["subscriber_id"]
        for r in await conn.fetch("SELECT email, subscriber_id FROM einmal.sends WHERE campaign_id = $1", campaign)
    }
    path = verp.ReturnPath("bounces@example.org", SECRET)
    seen = {}
    for message in smtp_server.messages:
        is_ours, token = path.ours(message.mail_from)
        assert is_ours and token, message.mail_from
        seen[message.rcpt_tos[0]] = path.verify(token)
    assert seen == {email: (campaign, subscriber) for email, subscriber in rows.items()}


async def test_without_a_return_path_the_envelope_sender_is_the_from_address(
    conn: asyncpg.Connection, dsn: str, smtp_server
) -> None:
    campaign = await seed(conn, ["a@example.com", "b@example.com"])
    async with running_node(node_settings(dsn, smtp_server.port)):
        await approve(conn, campaign)
        await wait_status(conn, campaign, "sent")
    assert sorted(m.mail_from for m in smtp_server.messages) == ["news@example.com"] * 2


def test_a_forged_or_altered_token_does_not_verify() -> None:
    path = verp.ReturnPath("bounces@example.org", SECRET)
    token = path.token(7, 42)
    assert path.verify(token) == (7, 42)
    assert path.verify(token.upper()) == (7, 42)  # a relay that folds case still hands back a valid token
    assert path.verify(token.replace("7.42", "7.43", 1)) is None
    assert path.verify("7.42.0000000000000000") is None
    assert verp.ReturnPath("bounces@example.org", "other").verify(token) is None
    assert path.verify("07.42." + token.split(".")[2]) is None
    for garbage in ("", "....", "7.42", "x.y.z", "7.42." + "a" * 100):
        assert path.verify(garbage) is None


def test_a_signature_with_any_one_digit_altered_does_not_verify() -> None:
    # all 16 hex digits are compared: a check of a prefix would take the last digits on trust
    path = verp.ReturnPath("bounces@example.org", SECRET)
    ids, _, signature = path.token(7, 42).rpartition(".")
    assert len(signature) == verp.SIGNATURE_HEX == 16
    for i, digit in enumerate(signature):
        altered = signature[:i] + ("0" if digit != "0" else "1") + signature[i + 1 :]
        assert path.verify(f"{ids}.{altered}") is None, f"digit {i + 1} of 16 altered: {altered}"
    assert path.verify(f"{ids}.{signature[:-1]}") is None, "one digit short"


def test_every_key_of_a_rotated_secret_verifies_and_the_first_signs() -> None:
    old = verp.ReturnPath("bounces@example.org", "old")
    rotated = verp.ReturnPath("bounces@example.org", "new,old")
    assert rotated.verify(old.token(1, 2)) == (1, 2)
    assert rotated.token(1, 2) == verp.ReturnPath("bounces@example.org", "new").token(1, 2)


def test_the_return_path_mailbox_is_recognised_with_or_without_a_token() -> None:
    path = verp.ReturnPath("bounces@example.org", SECRET)
    assert path.ours("bounces@example.org") == (True, None)
    assert path.ours("<Bounces+1.2.ab@Example.ORG>") == (True, "1.2.ab")
    assert path.ours("bounces@example.net") == (False, None)
    assert path.ours("news@example.org") == (False, None)
    assert path.ours("bounces-x@example.org") == (False, None)


def test_a_return_path_needs_a_key_and_a_plain_address() -> None:
    with pytest.raises(ValueError, match="RETURN_PATH_SECRET"):
        Settings(return_path="bounces@example.org")
    with pytest.raises(ValueError, match="without"):
        Settings(return_path="bounces+x@example.org", return_path_secret="k")
    assert Settings(return_path="bounces@example.org", unsubscribe_secret="u").return_path == "bounces@example.org"
