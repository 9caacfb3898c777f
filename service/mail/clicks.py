"""Click tracking's links (docs/design.md#click-tracking): a tracked campaign's links rewritten once, signed per
recipient.

``Links.of(text, html)`` finds a campaign's links: in the HTML body every ``href`` whose value is an absolute
http(s) URL without template syntax, in the text body every bare http(s) URL, outside ``{{ }}``, ``{% %}``,
``{# #}`` and raw blocks. A link that holds template syntax (``https://x.org/?e={{ email }}``), a mailto and
``{{ unsubscribe_url }}`` stay as they are. Each distinct URL is numbered 1, 2, … in the order met (the text
body first); the same URL twice is one link. Link 0 is the hidden link: one invisible anchor put in the HTML
body (after ``<body …>``), which no person clicks and scanners follow. The same function runs when the
campaign is compiled (rewriting) and when a click names a link (reading): the URL a link leads to is always
the campaign's own template's, never taken from the request.

A link's token names the account, campaign, subscriber and link, in the unsubscribe token's form
(service/mail/unsubscribe.py): ``<account>.<campaign>.<subscriber>.<link>.<signature>``, the HMAC-SHA256 over
``click:<account>:<campaign>:<subscriber>:<link>``, keyed with EINMAL_UNSUBSCRIBE_SECRET and rotated as it
is: the first key signs, every key verifies. Altering any part fails the signature.

In the template a link becomes the field ``{{ _clickN }}`` (a name no operator's template may use: check()
refuses it), which a line then fills as a format string; per recipient only the signatures are made.
"""

import html as html_module
import re
from collections.abc import Callable

from service.mail import unsubscribe
from service.mail.mailing import Mailing
from service.mail.templates import LINK_FIELD as FIELD
from service.mail.unsubscribe import Secret

PURPOSE = "click"
HIDDEN = 0
_PROTECTED = re.compile(
    r"\{%-?\s*raw\s*-?%\}.*?\{%-?\s*endraw\s*-?%\}|\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL | re.IGNORECASE
)
_HREF = re.compile(r"""(\bhref\s*=\s*)(["'])(https?://[^"'{}<>\s]+)\2""", re.IGNORECASE)
_BARE = re.compile(r"""https?://[^\s<>"'{}]+""", re.IGNORECASE)
_GLUED = re.compile(r"""[^\s<>"']+$""")
_TRAILING = ".,;:!?)]'"  # a sentence's punctuation after a bare URL is not part of it
_BODY = re.compile(r"<body\b[^>]*>", re.IGNORECASE)
_DOCTYPE = re.compile(r"\s*<!doctype[^>]*>", re.IGNORECASE)
_HIDDEN_ANCHOR = '<a href="{{ ' + FIELD + '0 }}" style="display:none" aria-hidden="true" tabindex="-1"></a>'


def _signature(key: bytes, account_id: int, campaign_id: int, subscriber_id: int, link: int) -> bytes:
    return unsubscribe.signature(key, f"{PURPOSE}:{account_id}:{campaign_id}:{subscriber_id}:{link}")


def verify_token(secret: Secret, token: str) -> tuple[int, int, int, int] | None:
    """(account_id, campaign_id, subscriber_id, link) when any key of `secret` signed the token, else None."""
    ids = unsubscribe.verify_ids(_signature, secret, token, 4)
    return (ids[0], ids[1], ids[2], ids[3]) if ids is not None else None


def _outside(text: str, pattern: re.Pattern[str], replace: Callable[[re.Match[str]], str]) -> str:
    """`text` with `pattern`'s matches replaced by `replace(match)`, but only between template constructs."""
    out, position = [], 0
    for construct in _PROTECTED.finditer(text):
        segment = text[position : construct.start()]
        glued = _GLUED.search(segment)  # a URL the construct continues (…?e={{ email }}) is personal: left as is
        at = glued.start() if glued else len(segment)
        out.append(pattern.sub(replace, segment[:at]) + segment[at:])
        out.append(construct.group(0))
        position = construct.end()
    out.append(pattern.sub(replace, text[position:]))
    return "".join(out)


class Links:
    """A campaign's links in order (``urls[n - 1]`` is link n) and its bodies rewritten to carry them."""

    __slots__ = ("html", "text", "urls")

    def __init__(self, text: str, html: str | None) -> None:
        self.urls: list[str] = []
        numbers: dict[str, int] = {}

        def field(url: str) -> str:
            if url not in numbers:
                self.urls.append(url)
                numbers[url] = len(self.urls)
            return "{{ " + f"{FIELD}{numbers[url]}" + " }}"

        def bare(match: re.Match[str]) -> str:
            url = match.group(0).rstrip(_TRAILING)
            return field(url) + match.group(0)[len(url) :]

        def href(match: re.Match[str]) -> str:
            quote = match.group(2)
            return match.group(1) + quote + field(html_module.unescape(match.group(3))) + quote

        self.text = _outside(text, _BARE, bare)
        self.html = after_body(_outside(html, _HREF, href)) if html else html

    @classmethod
    def of(cls, text: str, html: str | None) -> "Links":
        return cls(text, html)

    def url(self, link: int) -> str | None:
        """Where link `link` leads; None for the hidden link and for a number the campaign has not."""
        return self.urls[link - 1] if 0 < link <= len(self.urls) else None


def after_body(html: str, snippet: str = _HIDDEN_ANCHOR) -> str:
    """The HTML with `snippet` (the hidden link; an open's pixel, service/mail/opens.py) after its ``<body …>``
    tag (outside template syntax), else after its doctype, else at its start."""
    spans = [m.span() for m in _PROTECTED.finditer(html)]
    for body in _BODY.finditer(html):
        if not any(start <= body.start() < end for start, end in spans):
            return html[: body.end()] + snippet + html[body.end() :]
    doctype = _DOCTYPE.match(html)
    at = doctype.end() if doctype else 0
    return html[:at] + snippet + html[at:]


class Signer:
    """Each link's URL for one recipient, the key prepared once (unsubscribe.Mac): ``{"_click0": url, …}``."""

    __slots__ = ("_mac", "_names", "_prefix", "html_safe")

    def __init__(self, secret: Secret, base_url: str, count: int) -> None:
        self._mac = unsubscribe.Mac(unsubscribe.signing_key(secret))
        self._prefix = base_url.rstrip("/") + "/"
        self._names = [f"{FIELD}{n}" for n in range(count + 1)]
        # the rest of a URL is digits, dots and url-safe base64: HTML-escaped it is the same
        self.html_safe = html_module.escape(self._prefix) == self._prefix

    def urls(self, account_id: int, campaign_id: int, subscriber_id: int) -> dict[str, str]:
        head = f"{self._prefix}{account_id}.{campaign_id}.{subscriber_id}."
        text = f"{PURPOSE}:{account_id}:{campaign_id}:{subscriber_id}:".encode()
        return {
            name: f"{head}{n}.{self._mac.signature(text + str(n).encode()).decode()}"
            for n, name in enumerate(self._names)
        }


def missing(mailing: Mailing) -> list[str]:
    """The settings a tracked campaign needs that this process lacks; [] when it has them."""
    return [
        name
        for name, value in (
            ("EINMAL_CLICK_URL", mailing.click_url),
            ("EINMAL_UNSUBSCRIBE_SECRET", mailing.unsubscribe_secret),
        )
        if not value
    ]
