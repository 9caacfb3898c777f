"""A tracked campaign's links: which are rewritten (static http(s) links outside template syntax), which are
left alone (personal ones, mailto, the unsubscribe link, raw blocks), where the hidden link goes, and tokens
that verify under every key of a rotated secret and under no other."""

import pytest
from pydantic import SecretStr, ValidationError

from service.mail import clicks, confirm, unsubscribe
from service.mail.render import CampaignTemplate
from service.settings import Settings

SECRET = "k" * 32


def test_static_links_are_numbered_once_and_personal_ones_left_alone() -> None:
    text = "See https://example.org/a. Again (https://example.org/a)\nYours: https://example.org/u?e={{ email }}\n"
    html = (
        '<body><a href="https://example.org/b?x=1&amp;y=2">b</a> <a href="mailto:a@example.org">m</a> '
        "<a href='https://example.org/a'>a</a> <a href=\"{{ unsubscribe_url }}\">u</a>"
        '{% raw %}<a href="https://example.org/raw">r</a>{% endraw %}'
        '{# <a href="https://example.org/comment"> #}{% if name %}<a href="https://example.org/c">c</a>{% endif %}'
        "</body>"
    )
    links = clicks.Links.of(text, html)
    assert links.urls == ["https://example.org/a", "https://example.org/b?x=1&y=2", "https://example.org/c"]
    assert links.text.startswith("See {{ _click1 }}. Again ({{ _click1 }})\n")
    assert "https://example.org/u?e={{ email }}" in links.text
    assert links.html is not None
    assert links.html.startswith('<body><a href="{{ _click0 }}" style="display:none"')
    for kept in ("mailto:a@example.org", "{{ unsubscribe_url }}", "https://example.org/raw", "example.org/comment"):
        assert kept in links.html
    assert (links.url(0), links.url(1), links.url(3), links.url(4)) == (
        None,
        "https://example.org/a",
        links.urls[2],
        None,
    )


def test_the_hidden_link_goes_after_the_doctype_without_a_body_tag() -> None:
    links = clicks.Links.of("t", "<!DOCTYPE html>\n<p>hi</p>")
    assert links.html == '<!DOCTYPE html><a href="{{ _click0 }}" style="display:none" aria-hidden="true" ' + (
        'tabindex="-1"></a>\n<p>hi</p>'
    )


def test_a_token_verifies_under_each_key_of_a_rotated_secret_and_no_other() -> None:
    url = clicks.Signer("old-key", "https://e.org/c/", 2).urls(1, 2, 3)["_click2"]
    token = url.removeprefix("https://e.org/c/")
    assert clicks.verify_token("new-key,old-key", token) == (1, 2, 3, 2)
    assert clicks.verify_token("new-key", token) is None
    assert unsubscribe.verify_token("old-key", token) is None  # a click token is no unsubscribe token
    assert clicks.verify_token("old-key", unsubscribe.make_token("old-key", 1, 2, 3) + ".2") is None


@pytest.mark.parametrize("key", [b"k", b"x" * 64, b"y" * 65, "ünï-key".encode() * 20])
def test_the_prepared_mac_signs_as_hmac_does_and_the_tokens_made_with_it_verify(key: bytes) -> None:
    """unsubscribe.Mac (the key's hash states made once) against the one-shot hmac.digest; a key longer than
    SHA-256's block is hashed first, as RFC 2104 says."""
    for text in (b"", b"1:2:3", b"click:1:2:3:0", b"z" * 200):
        assert unsubscribe.Mac(key).signature(text) == unsubscribe.signature(key, text.decode())
    secret = key.decode()
    assert unsubscribe.verify_token(secret, unsubscribe.Signer(secret).token(4, 5, 6)) == (4, 5, 6)
    assert confirm.verify_token(secret, confirm.Signer(secret).token(4, 5, 6)) == (4, 5, 6)
    assert clicks.verify_token(
        secret, clicks.Signer(secret, "https://c.example", 1).urls(4, 5, 6)["_click1"].split("/")[-1]
    ) == (4, 5, 6, 1)


def test_a_tracked_message_carries_each_recipients_own_links_and_is_signed_per_recipient() -> None:
    settings = Settings(unsubscribe_secret=SecretStr(SECRET), click_url="https://e.org/c")
    campaign = {
        "id": 7,
        "account_id": 1,
        "subject": "s",
        "from_address": "a@example.org",
        "body_text": "Read https://example.org/a\n",
        "body_html": None,
        "track_clicks": True,
    }
    template = CampaignTemplate.compile(campaign, settings)
    first, second = template.render(10, "x@example.org", "X"), template.render(11, "y@example.org", "Y")
    assert b"https://e.org/c/1.7.10.1." in first and b"https://e.org/c/1.7.11.1." in second
    assert b"example.org/a" not in first.split(b"\r\n\r\n", 1)[1]


def test_a_link_inside_a_block_is_tracked_as_the_others() -> None:
    settings = Settings(unsubscribe_secret=SecretStr(SECRET), click_url="https://e.org/a&b/c")
    html = (
        '{% if name %}<a href="https://example.org/pro">pro</a>{% endif %}\n<a href="https://example.org/">home</a>\n'
    )
    campaign = {
        "id": 7,
        "account_id": 1,
        "subject": "s",
        "from_address": "a@example.org",
        "body_text": "t\n",
        "body_html": html,
        "track_clicks": True,
    }
    body = CampaignTemplate.compile(campaign, settings).render(10, "x@example.org", "X").split(b"text/html")[1]
    flat = body.replace(b"=\r\n", b"").replace(b"=3D", b"=")
    # each link's own, the & of the click URL's path escaped in HTML
    assert flat.count(b'href="https://e.org/a&amp;b/c/1.7.10.') == 3  # the hidden link, pro, home
    assert b"example.org/pro" not in flat


def test_a_click_url_takes_no_query() -> None:
    with pytest.raises(ValidationError, match="no query"):
        Settings(click_url="https://e.org/c?x=1")
