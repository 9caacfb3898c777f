"""Message rendering: every message is parsed back with the standard library and checked."""

import email.parser
import email.policy
import re
from datetime import UTC, datetime
from email.header import decode_header, make_header
from email.parser import BytesParser
from email.utils import parsedate_to_datetime

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pydantic import SecretStr

from service.errors import Invalid
from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate, check_template
from service.mail.unsubscribe import make_token, verify_token
from service.settings import Settings

SECRET = "s3cret-for-tests"
UNSUBSCRIBE = "https://news.example.org/unsubscribe"
PARSER = BytesParser(policy=email.policy.default)
RAW_PARSER = BytesParser(policy=email.policy.compat32)
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
BASE_HEADERS = {"From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type", "Feedback-ID"}
UNSUBSCRIBE_HEADERS = {"List-Unsubscribe", "List-Unsubscribe-Post"}


def make_settings(domain=None, url=UNSUBSCRIBE, secret=SECRET) -> Settings:
    return Settings(
        message_id_domain=domain,
        unsubscribe_url=url,
        unsubscribe_secret=SecretStr(secret) if secret is not None else None,
    )


def campaign(**overrides) -> dict:
    values = {
        "id": 42,
        "account_id": 7,
        "subject": "News for {{ name }}",
        "from_address": "Acme News <news@acme.example>",
        "body_text": "Hello {{name}},\nyou are {{ email }}.\nLeave: {{ unsubscribe_url }}\n",
        "body_html": None,
    }
    return values | overrides


def render(subscriber_id=1007, email="jane@example.org", name="Jane Doe", settings=None, **fields):
    template = CampaignTemplate.compile(campaign(**fields), Mailing.of(settings or make_settings()))
    return template.render(subscriber_id, email, name)


def parse(raw: bytes):
    assert_wire_format(raw)
    return PARSER.parsebytes(raw)


def assert_wire_format(raw: bytes) -> None:
    lines = raw.split(b"\r\n")
    assert b"\r" not in raw.replace(b"\r\n", b"") and b"\n" not in raw.replace(b"\r\n", b"")
    assert max(len(line) for line in lines) <= 998
    head = raw.split(b"\r\n\r\n", 1)[0]
    head.decode("ascii")  # headers are ASCII: non-ASCII text travels as encoded-words
    assert all(len(line) <= 78 for line in head.split(b"\r\n") if b"=?" in line)


def header_names(message) -> list[str]:
    return sorted(name for name, _ in message.items())


def assert_headers_clean(message) -> None:
    assert message.defects == []
    for name in message.keys():
        assert message[name].defects == (), name


def decoded(raw: bytes, name: str) -> str:
    """A header decoded the RFC 2047 way: whitespace between adjacent encoded-words dropped."""
    unfolded = re.sub(r"\r\n(?=[ \t])", "", RAW_PARSER.parsebytes(raw)[name])
    return str(make_header(decode_header(unfolded)))


def expected_display(name: str) -> str:
    """A line break of the name (CRLF, CR or LF) is one space, like each other control character."""
    return CONTROL.sub(" ", re.sub(r"\r\n?", "\n", name)).strip()


def display_name(raw: bytes, message) -> str:
    """The To display name; the stdlib keeps whitespace between encoded-words of a phrase, RFC 2047
    drops it, so a name folded into several encoded-words is decoded the RFC way."""
    to_raw = RAW_PARSER.parsebytes(raw)["To"]
    if "=?" not in to_raw:
        return message["To"].addresses[0].display_name
    text = decoded(raw, "To")
    return text[: text.rindex(" <")]


def body(part) -> str:
    return part.get_content().replace("\r\n", "\n")


# -- the message --------------------------------------------------------------------------


def test_plain_campaign_renders_every_header_and_merges_the_body():
    raw = render()
    message = parse(raw)
    assert header_names(message) == sorted(BASE_HEADERS | UNSUBSCRIBE_HEADERS | {"Content-Transfer-Encoding"})
    assert_headers_clean(message)
    assert str(message["From"]) == "Acme News <news@acme.example>"
    assert message["To"].addresses[0].display_name == "Jane Doe"
    assert message["To"].addresses[0].addr_spec == "jane@example.org"
    assert str(message["Subject"]) == "News for Jane Doe"
    assert str(message["Message-ID"]) == "<campaign.42.1007@acme.example>"
    assert str(message["MIME-Version"]) == "1.0"
    assert message.get_content_type() == "text/plain"
    assert message.get_content_charset() == "utf-8"
    assert message["Content-Transfer-Encoding"] in ("quoted-printable", "base64")
    url = str(message["List-Unsubscribe"])[1:-1]
    assert body(message) == f"Hello Jane Doe,\nyou are jane@example.org.\nLeave: {url}\n"


def test_message_id_uses_the_configured_domain():
    message = parse(render(subscriber_id=5, settings=make_settings(domain="mail.example.net")))
    assert str(message["Message-ID"]) == "<campaign.42.5@mail.example.net>"


def test_date_is_rfc5322_and_taken_from_the_clock():
    template = CampaignTemplate.compile(campaign(), Mailing.of(make_settings()))
    template.clock = lambda: 1_700_000_000.25
    message = parse(template.render(1, "a@example.org", "A"))
    assert parsedate_to_datetime(str(message["Date"])) == datetime.fromtimestamp(1_700_000_000, UTC)


def test_envelope_from_is_the_bare_address_and_from_keeps_a_non_ascii_name():
    template = CampaignTemplate.compile(
        campaign(from_address="Bäckerei Süß <shop@bakery.example>"), Mailing.of(make_settings())
    )
    assert template.envelope_from == "shop@bakery.example"
    message = parse(template.render(1, "a@example.org", "A"))
    assert message["From"].addresses[0].display_name == "Bäckerei Süß"
    assert message["From"].addresses[0].addr_spec == "shop@bakery.example"
    assert str(message["Message-ID"]) == "<campaign.42.1@bakery.example>"


@pytest.mark.parametrize(
    "from_address", ["news@acme.example", "Acme <news@acme.example>", '"A, B" <news@acme.example>']
)
def test_a_from_address_that_is_one_mailbox_is_accepted(from_address):
    template = CampaignTemplate.compile(campaign(from_address=from_address), Mailing.of(make_settings()))
    assert template.envelope_from == "news@acme.example"


@pytest.mark.parametrize(
    "from_address",
    [
        "",
        "not an address",
        "a@example.org, b@example.org",
        "<",
        "0@",
        ":;",
        "News <news@acme.example>\r\nBcc: x@evil.example",
    ],
)
def test_a_from_address_that_is_not_one_mailbox_is_refused(from_address):
    with pytest.raises(Invalid, match="from address"):
        CampaignTemplate.compile(campaign(from_address=from_address), Mailing.of(make_settings()))


def test_html_campaign_is_multipart_alternative_with_text_then_html():
    html = '<p>Hi {{ name }} ({{email}})</p><a href="{{ unsubscribe_url }}">leave</a>\n'
    raw = render(name='Tom & "Jerry" <b>', email="tom@example.org", body_html=html)
    message = parse(raw)
    assert header_names(message) == sorted(BASE_HEADERS | UNSUBSCRIBE_HEADERS)
    assert_headers_clean(message)
    assert message.get_content_type() == "multipart/alternative"
    parts = list(message.iter_parts())
    assert [part.get_content_type() for part in parts] == ["text/plain", "text/html"]
    assert all(part.get_content_charset() == "utf-8" for part in parts)
    url = str(message["List-Unsubscribe"])[1:-1]
    assert body(parts[0]).startswith('Hello Tom & "Jerry" <b>,\nyou are tom@example.org.')
    assert body(parts[1]) == (
        f'<p>Hi Tom &amp; &#34;Jerry&#34; &lt;b&gt; (tom@example.org)</p><a href="{url}">leave</a>\n'
    )


def test_boundary_is_fixed_per_campaign_and_absent_from_the_bodies():
    template = CampaignTemplate.compile(campaign(body_html="<p>{{ name }}</p>"), Mailing.of(make_settings()))
    first, second = (PARSER.parsebytes(template.render(i, "a@example.org", "--=_einmal.42")) for i in (1, 2))
    boundary = first.get_boundary()
    assert boundary == second.get_boundary() and boundary.startswith("=_einmal.42.")
    other = CampaignTemplate.compile(campaign(body_html="<p>x</p>"), Mailing.of(make_settings()))
    assert PARSER.parsebytes(other.render(1, "a@example.org", "A")).get_boundary() != boundary
    for part in first.iter_parts():
        assert boundary not in part.as_string()


def test_non_ascii_merge_fields_round_trip_as_encoded_words():
    name = "Zoë Łukasiewicz 山田"
    raw = render(name=name, subject="Hallo {{ name }} — Grüße")
    message = parse(raw)
    assert_headers_clean(message)
    assert str(message["Subject"]) == f"Hallo {name} — Grüße"
    assert message["To"].addresses[0].display_name == name
    assert b"=?utf-8?" in raw.split(b"\r\n\r\n")[0]
    assert body(message).startswith(f"Hello {name},\n")


@pytest.mark.parametrize("name", ["Ann " * 300, "x" * 2000, "Ü" * 700, "Jörg-" * 300 + " " * 5 + "end"])
def test_very_long_names_are_folded_and_round_trip(name):
    raw = render(name=name, subject="{{ name }}")
    message = parse(raw)
    assert_headers_clean(message)
    assert str(message["Subject"]) == name.strip() and decoded(raw, "Subject") == name.strip()
    assert display_name(raw, message) == name.strip()
    assert message["To"].addresses[0].addr_spec == "jane@example.org"


def test_text_that_looks_like_an_encoded_word_stays_literal():
    name = "=?utf-8?b?QmNjOiB4QGV2aWwuZXhhbXBsZQ==?="  # "Bcc: x@evil.example" when decoded
    raw = render(name=name, subject="{{ name }}")
    message = parse(raw)
    assert str(message["Subject"]) == name
    assert display_name(raw, message) == name


def test_empty_name_gives_a_bare_address():
    message = parse(render(name="  "))
    assert str(message["To"]) == "jane@example.org"


def test_a_missing_name_reads_as_no_name():
    raw = render(name=None)
    message = parse(raw)
    assert str(message["To"]) == "jane@example.org"
    assert str(message["Subject"]) == "News for"
    assert b"Subject: News for\r\n" in raw
    assert body(message).startswith("Hello ,\n")


def test_plain_ascii_name_with_quotes_and_backslashes_is_quoted():
    raw = render(name='Jane "JD" Doe \\ Co.')
    assert b'To: "Jane \\"JD\\" Doe \\\\ Co." <jane@example.org>\r\n' in raw
    assert parse(raw)["To"].addresses[0].display_name == 'Jane "JD" Doe \\ Co.'


def test_long_lines_dots_and_equals_signs_survive_the_transfer_encoding():
    text = "x" * 5000 + "\n.\n..leading dots\nFrom the start\n=?utf-8?b?QQ==?= 100% = done\t \n"
    raw = render(body_text="{{ name }}\n" + text, name="N")
    assert body(parse(raw)) == "N\n" + text


# -- unsubscribe --------------------------------------------------------------------------


def test_list_unsubscribe_is_one_click_and_its_token_verifies():
    message = parse(render(subscriber_id=1007))
    assert str(message["List-Unsubscribe-Post"]) == "List-Unsubscribe=One-Click"
    url = str(message["List-Unsubscribe"])
    assert url.startswith(f"<{UNSUBSCRIBE}?token=") and url.endswith(">")
    token = url[1:-1].split("?token=")[1]
    assert verify_token(SecretStr(SECRET), token) == (7, 42, 1007)
    assert token == make_token(SECRET, 7, 42, 1007)


def test_unsubscribe_url_with_a_query_gets_an_ampersand():
    message = parse(render(settings=make_settings(url=f"{UNSUBSCRIBE}?list=3")))
    assert str(message["List-Unsubscribe"]).startswith(f"<{UNSUBSCRIBE}?list=3&token=7.42.1007.")


def test_no_list_unsubscribe_without_a_configured_url():
    raw = render(settings=make_settings(url=None, secret=None), body_text="Hello {{ name }}\n")
    message = parse(raw)
    assert header_names(message) == sorted(BASE_HEADERS | {"Content-Transfer-Encoding"})
    assert b"List-Unsubscribe" not in raw


def test_unsubscribe_url_without_a_secret_is_refused():
    with pytest.raises(Invalid) as error:
        CampaignTemplate.compile(campaign(), Mailing.of(make_settings(secret=None)))
    assert str(error.value) == "EINMAL_UNSUBSCRIBE_SECRET must be set when EINMAL_UNSUBSCRIBE_URL is"


def test_unsubscribe_field_without_a_configured_url_is_refused():
    with pytest.raises(Invalid, match="unsubscribe_url"):
        CampaignTemplate.compile(campaign(), Mailing.of(make_settings(url=None, secret=None)))


def test_tokens_verify_only_with_the_right_secret_and_unchanged_ids():
    token = make_token(SECRET, 7, 42, 1007)
    assert re.fullmatch(r"[A-Za-z0-9._-]+", token)
    assert verify_token(SECRET, token) == (7, 42, 1007)
    assert verify_token(SecretStr(SECRET), token) == (7, 42, 1007)
    assert verify_token("another secret", token) is None
    account, campaign_id, subscriber, signature = token.split(".")
    assert verify_token(SECRET, f"{account}.{campaign_id}.1008.{signature}") is None
    assert verify_token(SECRET, f"{account}.{campaign_id}.01007.{signature}") is None
    assert verify_token(SECRET, f"{account}.{campaign_id}.{subscriber}.{signature[:-1]}") is None
    for garbage in ["", "...", "a.b.c.d", "7.42.1007", token + ".x", "7.42.١٠٠٧." + signature]:
        assert verify_token(SECRET, garbage) is None


# -- templates ----------------------------------------------------------------------------


def test_unknown_variable_is_named_with_its_line_and_the_known_ones():
    with pytest.raises(Invalid) as error:
        check_template("Hi\n{{ name }} {{ nme }}", "subject")
    assert str(error.value) == (
        "subject: line 2: unknown variable 'nme'; "
        "known: name, email, unsubscribe_url, confirm_url, attributes, campaign"
    )


def test_unclosed_braces_are_refused_with_their_line():
    with pytest.raises(Invalid, match=r"^body_text: line 2: unexpected end of template"):
        check_template("Hi {{ name }}\nand {{ email", "body_text")


@pytest.mark.parametrize("text", ["{{name}}", "{{ name }}", "{{ email\t}}", "{{unsubscribe_url}}", "}}", ""])
def test_known_fields_with_any_spacing_are_accepted(text):
    check_template(text, "subject")


def test_compile_refuses_a_campaign_with_an_unknown_field():
    with pytest.raises(Invalid, match=r"^body_html: line 1: unknown variable 'first_name'"):
        CampaignTemplate.compile(campaign(body_html="<p>{{ first_name }}</p>"), Mailing.of(make_settings()))


def test_braces_in_values_and_literal_text_are_kept():
    raw = render(name="{email} {{ name }}", body_text="{literal} {{ name }} }}\n")
    assert body(parse(raw)) == "{literal} {email} {{ name }} }}\n"


# -- bad input: nothing reaches a header -------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "Eve\r\nBcc: victim@example.org",
        "Eve\nBcc: victim@example.org",
        "Eve\rBcc: victim@example.org",
        "Eve\0Bcc: victim@example.org",
        "Eve\r\n\r\nfake body",
        "Eve\u2028Bcc: victim@example.org\x85Cc: x@example.org",
        '"\r\nBcc: victim@example.org\r\nX: "',
    ],
)
def test_a_name_cannot_add_a_header(name):
    raw = render(name=name, subject="Hi {{ name }}", body_html="<p>{{ name }}</p>")
    message = parse(raw)
    assert header_names(message) == sorted(BASE_HEADERS | UNSUBSCRIBE_HEADERS)
    assert_headers_clean(message)
    head = raw.split(b"\r\n\r\n", 1)[0]
    assert b"\nBcc" not in head and b"\nCc" not in head
    assert str(message["Subject"]) == "Hi " + expected_display(name)
    assert display_name(raw, message) == expected_display(name)


@pytest.mark.parametrize(
    "address",
    [
        "a@example.org\r\nBcc: b@example.org",
        "a@example.org\n",
        "a\0@example.org",
        "a@exa\rmple.org",
        "a@example.org\x85",
        "a b@example.org",
        "<a@example.org>",
        "nobody",
        "a@" + "x" * 1000 + ".example",
    ],
)
def test_an_address_that_cannot_go_in_a_header_is_refused(address):
    template = CampaignTemplate.compile(campaign(), Mailing.of(make_settings()))
    with pytest.raises(ValueError):
        template.render(1, address, "Name")


# -- properties ---------------------------------------------------------------------------

# arbitrary text, plus long runs of the characters that matter to quoting, folding and encoding
tricky = st.text(alphabet=st.sampled_from(' \t\r\n\0"\\=?_()<>,;:@.aBz\x85\u2028é山\U0001f600'), max_size=400)
any_text = st.one_of(st.text(), tricky, st.text(min_size=70, max_size=300))
text_without_braces = any_text.map(lambda text: text.replace("{", "["))  # "{" + "{{ name }}" is unclosed


@hypothesis_settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=any_text, subject=text_without_braces, subscriber_id=st.integers(0, 2**63 - 1))
def test_any_name_and_subject_give_exactly_the_expected_headers(name, subject, subscriber_id):
    raw = render(subscriber_id=subscriber_id, name=name, subject=subject + "{{ name }}", body_html="<p>{{ name }}</p>")
    message = parse(raw)
    assert header_names(message) == sorted(BASE_HEADERS | UNSUBSCRIBE_HEADERS)
    assert_headers_clean(message)
    assert str(message["Message-ID"]) == f"<campaign.42.{subscriber_id}@acme.example>"
    assert str(message["Subject"]) == (CONTROL.sub(" ", subject) + expected_display(name)).strip(" ")
    assert display_name(raw, message) == expected_display(name)
    assert body(next(message.iter_parts())).startswith(re.sub(r"\r\n|\r", "\n", f"Hello {name},"))


@hypothesis_settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=any_text, before=text_without_braces, after=text_without_braces, html=st.booleans())
def test_any_body_round_trips_with_the_name_merged(name, before, after, html):
    text = before + "{{ name }}" + after
    raw = render(name=name, body_text=text, body_html="<i>{{ name }}</i>" + after if html else None)
    message = parse(raw)
    assert_headers_clean(message)
    part = next(message.iter_parts()) if html else message
    # line breaks of the template and of the value each become one CRLF; the last line ends with one too
    expected = "".join(re.sub(r"\r\n|\r", "\n", piece) for piece in (before, name, after))
    assert body(part) == expected + ("" if text.endswith(("\r", "\n")) else "\n")


# -- international addresses --------------------------------------------------------------


@pytest.mark.parametrize(
    "email, header",
    [
        ("hans@bücher.example", "hans@xn--bcher-kva.example"),  # an ASCII local part: the A-label, all ASCII
        ("hans@xn--bcher-kva.example", "hans@xn--bcher-kva.example"),
        ("ann@example.org", "ann@example.org"),
    ],
)
def test_an_address_with_an_ascii_local_part_is_ascii_in_the_header(email, header):
    message = parse(render(email=email, from_address="Bücher <news@bücher.example>"))
    assert message["To"].addresses[0].addr_spec == header
    assert message["From"].addresses[0].addr_spec == "news@xn--bcher-kva.example"
    assert message["To"].addresses[0].display_name == "Jane Doe"
    assert body(message).startswith(f"Hello Jane Doe,\nyou are {email}.")  # the body keeps it as written


def test_a_non_ascii_local_part_stays_utf8_in_the_header():
    raw = render(email="jörg@bücher.example", name="Jörg")
    assert "To: =?utf-8?b?SsO2cmc=?= <jörg@bücher.example>\r\n".encode() in raw
    message = email.parser.Parser(policy=email.policy.default).parsestr(raw.decode("utf-8"))  # RFC 6532
    assert message["To"].addresses[0].addr_spec == "jörg@bücher.example"
    assert message.defects == []  # (the stdlib notes a NonASCIILocalPartDefect on the To header, as RFC 6532 allows)
