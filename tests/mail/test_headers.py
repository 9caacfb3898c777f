"""Reply-To, List-Id, Feedback-ID, the mailto: form of List-Unsubscribe and a campaign's own
headers: each parsed back with the standard library; none can add a header line."""

import json

import asyncpg
import pytest
from pydantic import SecretStr

from service.errors import Invalid
from service.mail import headers
from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate
from service.settings import Settings
from tests.cli.test_campaign_commands import seed_account
from tests.mail.test_render import SECRET, UNSUBSCRIBE, assert_headers_clean, campaign, make_settings, parse

INJECTIONS = [
    "spring\r\nBcc: victim@example.org",
    "spring\nBcc: victim@example.org",
    "a\rb",
    "a\x00b",
    "a\u2028Bcc: v@example.org",
    "a\x85b",
]


def rendered(settings=None, **fields):
    template = CampaignTemplate.compile(campaign(**fields), Mailing.of(settings or make_settings()))
    return parse(template.render(1007, "jane@example.org", "Jane"))


def test_reply_to_list_id_feedback_id_and_own_headers_round_trip_through_the_stdlib_parser():
    message = rendered(
        reply_to="Acme Support <help@acme.example>",
        list_id="Acme Neuigkeiten für alle <news.7.acme.example>",
        headers=json.dumps([["X-Campaign", "spring"], ["X-Note", "Grüße aus Köln"]]),
    )
    assert_headers_clean(message)
    assert message["Reply-To"].addresses[0].addr_spec == "help@acme.example"
    assert message["Reply-To"].addresses[0].display_name == "Acme Support"
    assert str(message["List-Id"]) == "Acme Neuigkeiten für alle <news.7.acme.example>"
    assert str(message["Feedback-ID"]) == "42:7:einmal:acme.example"
    assert str(message["X-Campaign"]) == "spring"
    assert str(message["X-Note"]) == "Grüße aus Köln"


def test_feedback_id_names_the_dkim_domain_when_signing():
    settings = make_settings().model_copy(update={"dkim_domain": "mail.acme.example"})
    assert str(rendered(settings)["Feedback-ID"]) == "42:7:einmal:mail.acme.example"


def test_list_unsubscribe_carries_the_link_and_the_mailto_form_with_the_same_token():
    settings = make_settings().model_copy(update={"unsubscribe_mailto": "unsubscribe@acme.example"})
    message = rendered(settings)
    assert_headers_clean(message)
    value = " ".join(str(message["List-Unsubscribe"]).split())
    link, mailto = value.split(", ")
    token = link.split("token=")[1].rstrip(">")
    assert link.startswith(f"<{UNSUBSCRIBE}?token=")
    assert mailto == f"<mailto:unsubscribe@acme.example?subject=unsubscribe%20{token}>"
    assert str(message["List-Unsubscribe-Post"]) == "List-Unsubscribe=One-Click"


def test_mailto_alone_has_no_one_click_header():
    settings = Settings(unsubscribe_mailto="unsubscribe@acme.example", unsubscribe_secret=SecretStr(SECRET))
    message = rendered(settings, body_text="Hello {{ name }}")
    assert str(message["List-Unsubscribe"]).startswith("<mailto:unsubscribe@acme.example?subject=unsubscribe%20")
    assert message["List-Unsubscribe-Post"] is None


@pytest.mark.parametrize("value", INJECTIONS)
def test_no_new_field_takes_a_line_break_or_control_character(value):
    with pytest.raises(Invalid):
        headers.custom(f"X-Campaign: {value}")
    with pytest.raises(Invalid):
        headers.list_id(f"{value} <news.acme.example>")
    with pytest.raises(ValueError):
        Settings(unsubscribe_mailto=f"u@acme.example{value}")


@pytest.mark.parametrize(
    "spec",
    [
        "Bcc: x@example.org",
        "From: x@example.org",
        "Content-Type: text/html",
        "List-Unsubscribe: <https://evil.example>",
        "DKIM-Signature: v=1",
        "X Campaign: a",
        "X-Campaign",
        ": a",
        "X-Campaign:  ",
    ],
)
def test_reserved_or_malformed_header_names_are_refused(spec):
    with pytest.raises(Invalid):
        headers.custom(spec)


# -- through the command line ----------------------------------------------------------------

CREATE = [
    "campaign",
    "create",
    "--account",
    "acme",
    "--name",
    "N",
    "--subject",
    "S",
    "--from",
    "a@example.org",
    "--text",
    "Hi",
]


@pytest.mark.anyio
@pytest.mark.parametrize("option", ["--reply-to", "--list-id", "--header"])
@pytest.mark.parametrize("value", [*INJECTIONS[:3], INJECTIONS[4]])
async def test_campaign_create_refuses_injection_through_every_new_option_with_one_line(
    conn: asyncpg.Connection, dsn: str, option: str, value: str
) -> None:
    from tests.conftest import einmal

    await seed_account(conn)
    given = {
        "--reply-to": f"help@example.org{value}",
        "--list-id": f"news.example.org{value}",
        "--header": f"X-Campaign: {value}",
    }[option]
    result = einmal(*CREATE, option, given, dsn=dsn)
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == 0


@pytest.mark.anyio
async def test_campaign_create_stores_the_new_headers_and_the_node_renders_them(
    conn: asyncpg.Connection, dsn: str
) -> None:
    from tests.conftest import einmal

    await seed_account(conn)
    result = einmal(
        *CREATE,
        "--reply-to",
        "Help <help@acme.test>",
        "--list-id",
        "Acme <news.acme.example>",
        "--header",
        "X-Campaign: spring",
        dsn=dsn,
    )
    assert result.returncode == 0, result.stderr
    row = await conn.fetchrow(
        "SELECT id, account_id, subject, from_address, body_text, body_html, reply_to, list_id, "
        "headers FROM einmal.campaigns"
    )
    message = parse(CampaignTemplate.compile(dict(row), Mailing.of(make_settings())).render(1, "x@example.org", "X"))
    assert message["Reply-To"].addresses[0].addr_spec == "help@acme.test"
    assert str(message["List-Id"]) == '"Acme" <news.acme.example>'
    assert str(message["X-Campaign"]) == "spring"
