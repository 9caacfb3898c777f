"""Hostile merge values, subjects and from names: rendered exactly into clean headers, or refused
at compile with one line. Never a header injected, never a traceback.
"""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import escape  # what Jinja's autoescape does

from service.errors import Invalid
from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate
from tests.mail.test_render import (
    BASE_HEADERS,
    CONTROL,
    UNSUBSCRIBE_HEADERS,
    assert_headers_clean,
    campaign,
    decoded,
    display_name,
    make_settings,
    parse,
)

HEADERS = sorted(BASE_HEADERS | UNSUBSCRIBE_HEADERS)  # with an HTML part
TEXT_ONLY_HEADERS = sorted(BASE_HEADERS | UNSUBSCRIBE_HEADERS | {"Content-Transfer-Encoding"})


# -- rendering: hostile merge values, subjects and from names ---------------------------

HOSTILE = 'Zoë 山田 😀 \r\nBcc: victim@example.org\r\n\0\n\r\x85\u2028=?utf-8?b?QmNj?= "<x>" '
HUNDRED_KB = (HOSTILE * (100_000 // len(HOSTILE) + 1))[:100_000]


def expected_text(value: str) -> str:
    return re.sub(r"\r\n|\r|\n", "\n", value)


def test_a_100_kb_name_full_of_line_breaks_nul_and_non_ascii_stays_out_of_the_headers() -> None:
    template = CampaignTemplate.compile(
        campaign(subject="Hi {{ name }}!", body_text="Dear {{ name }}.\n", body_html="<p>{{ name }}</p>"),
        Mailing.of(make_settings()),
    )
    raw = template.render(7, "jane@example.org", HUNDRED_KB)
    message = parse(raw)  # every line within 998 octets, headers ASCII, CRLF only
    assert sorted(message.keys()) == HEADERS
    assert_headers_clean(message)
    shown = CONTROL.sub(" ", expected_text(HUNDRED_KB)).strip()  # a line break of the value is one space
    assert decoded(raw, "Subject") == f"Hi {shown}!"
    assert display_name(raw, message) == shown
    text, markup = message.iter_parts()
    assert text.get_content().replace("\r\n", "\n") == expected_text(f"Dear {HUNDRED_KB}.\n")
    assert markup.get_content().replace("\r\n", "\n") == expected_text(f"<p>{escape(HUNDRED_KB)}</p>\n")


@pytest.mark.parametrize(
    ("display", "subject", "shown"),
    [
        ("x" * 100_000, ("Grüße, 山田! " * 10_000)[:100_000], "x" * 100_000),
        ("Ünïcödé 山田 " * 2000, "S", ("Ünïcödé 山田 " * 2000).strip()),  # the stdlib parser is slow on non-ASCII
        ('"' + 'q\\"uoted ' * 10_000 + '"', "x" * 100_000, ('q"uoted ' * 10_000).strip()),
    ],
)
def test_a_100_kb_from_name_and_subject_are_folded_into_valid_headers(display: str, subject: str, shown: str) -> None:
    raw = CampaignTemplate.compile(
        campaign(subject=subject, from_address=f"{display} <news@acme.example>"), Mailing.of(make_settings())
    ).render(1, "a@example.org", "A")
    message = parse(raw)
    assert sorted(message.keys()) == TEXT_ONLY_HEADERS
    assert_headers_clean(message)
    assert decoded(raw, "Subject") == subject.strip()
    if b"From: =?" in raw:  # encoded-words: decoded the RFC 2047 way
        assert decoded(raw, "From") == f"{shown} <news@acme.example>"
    else:  # a quoted string
        assert message["From"].addresses[0].display_name == shown
    assert message["From"].addresses[0].addr_spec == "news@acme.example"


@pytest.mark.parametrize(
    "display", ["Eve\r\nBcc: v@example.org", "Eve\nX", "Eve\rX", "Eve\0X", "Eve\x85X", "Eve\u2028X", "Eve\tX"]
)
def test_a_from_name_with_a_control_character_is_refused_at_compile(display: str) -> None:
    with pytest.raises(Invalid, match="from address"):
        CampaignTemplate.compile(campaign(from_address=f"{display} <news@acme.example>"), Mailing.of(make_settings()))


@settings(max_examples=50, deadline=None)
@given(display=st.text(max_size=300) | st.text(st.sampled_from(' "\\\r\n\0é山=?<>,;:@'), max_size=60))
def test_any_from_name_is_refused_or_gives_exactly_one_clean_from_header(display: str) -> None:
    try:
        template = CampaignTemplate.compile(
            campaign(from_address=f"{display} <news@acme.example>"), Mailing.of(make_settings())
        )
    except Invalid as exc:
        assert "\n" not in str(exc) and "\r" not in str(exc)
        return
    assert not CONTROL.search(display)
    raw = template.render(1, "a@example.org", "A")
    message = parse(raw)
    assert sorted(message.keys()) == TEXT_ONLY_HEADERS
    assert_headers_clean(message)
    assert message["From"].addresses[0].addr_spec == "news@acme.example"
    assert template.envelope_from == "news@acme.example"
