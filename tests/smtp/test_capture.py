"""The capture SMTP server used by `einmal demo`, spoken to by a real SMTP client."""

from email.message import EmailMessage
from pathlib import Path

import aiosmtplib
import pytest

from service.smtp.capture import capture_server, count, duplicates

pytestmark = pytest.mark.anyio


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _message(to: str, message_id: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "news@example.org"
    msg["To"] = to
    msg["Subject"] = "Hello"
    msg["Message-ID"] = message_id
    msg.set_content(f"Hello {to}")
    return msg


async def test_each_message_is_captured_to_its_own_numbered_file(tmp_path: Path) -> None:
    async with capture_server(tmp_path) as (host, port):
        async with aiosmtplib.SMTP(hostname=host, port=port) as smtp:  # one connection, reused
            await smtp.send_message(_message("a@example.com", "<campaign.1.1@example.org>"))
            await smtp.send_message(_message("b@example.com", "<campaign.1.2@example.org>"))
            await smtp.send_message(_message("a@example.com", "<campaign.1.1@example.org>"))

    assert _names(tmp_path) == ["1.eml", "2.eml", "3.eml"], "no temporary file left"
    assert count(tmp_path) == 3
    second = (tmp_path / "2.eml").read_text()
    assert "Delivered-To: b@example.com" in second
    assert "Return-Path: <news@example.org>" in second
    assert "Hello b@example.com" in second


async def test_duplicates_finds_a_message_id_captured_twice(tmp_path: Path) -> None:
    async with capture_server(tmp_path) as (host, port):
        sends = [("a@example.com", "<m.1@x>"), ("b@example.com", "<m.2@x>"), ("a@example.com", "<m.1@x>")]
        for to, mid in sends:
            await aiosmtplib.send(_message(to, mid), hostname=host, port=port)

    assert count(tmp_path) == 3
    assert duplicates(tmp_path) == {"<m.1@x>": 2}


async def test_a_restarted_server_continues_the_numbering(tmp_path: Path) -> None:
    for mid in ("<m.1@x>", "<m.2@x>"):
        async with capture_server(tmp_path) as (host, port):
            await aiosmtplib.send(_message("a@example.com", mid), hostname=host, port=port)

    assert _names(tmp_path) == ["1.eml", "2.eml"]
    assert duplicates(tmp_path) == {}


async def test_an_open_client_connection_does_not_keep_the_server_from_stopping(tmp_path: Path) -> None:
    smtp = aiosmtplib.SMTP()
    async with capture_server(tmp_path) as (host, port):
        await smtp.connect(hostname=host, port=port)
        await smtp.send_message(_message("a@example.com", "<m.1@x>"))
    assert count(tmp_path) == 1
    with pytest.raises(aiosmtplib.SMTPServerDisconnected):
        await smtp.noop()
