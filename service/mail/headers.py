"""The per-campaign headers an operator chooses: checked once, at `campaign create`, and again
when a campaign is compiled for sending (service/mail/render.py encodes them).

    --reply-to ADDR           Reply-To (same rules as --from)
    --list-id 'Name <id>'     List-Id (RFC 2919); the id a dot-atom of ASCII labels, e.g. news.acme.example
    --header 'X-Name: value'  any header einmal does not write itself; repeatable

Nothing here can add a header line: a value with a line break or another control character
is refused, a name must be RFC 5322 field-name characters, and the names einmal writes or
that belong to the transport (From, To, Received, DKIM-Signature, Content-*, List-*, …)
cannot be given.
"""

import json
import re

from service.errors import Invalid

MAX_HEADERS, MAX_VALUE = 20, 900
_NAME = re.compile(r"[!-9;-~]{1,76}")  # RFC 5322 ftext: printable ASCII but ":"
_LIST_ID = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)+")
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
RESERVED = frozenset(
    {
        "from",
        "to",
        "cc",
        "bcc",
        "subject",
        "date",
        "message-id",
        "mime-version",
        "reply-to",
        "sender",
        "return-path",
        "received",
        "delivered-to",
        "dkim-signature",
        "arc-seal",
        "arc-message-signature",
        "arc-authentication-results",
        "authentication-results",
        "feedback-id",
        "precedence",
        "in-reply-to",
        "references",
    }
)
_RESERVED_PREFIXES = ("content-", "list-", "resent-")


def _text(value: str, what: str, field: str) -> str:
    def invalid(problem: str, code: str) -> Invalid:
        return Invalid(f"{what}: {problem}", code=f"{field}.{code}", field=field)

    if _UNSAFE.search(value):
        raise invalid("must be one line of printable text (no line breaks or control characters)", "not_printable")
    value = value.strip()
    if not value:
        raise invalid("must not be empty", "empty")
    if len(value) > MAX_VALUE:
        raise invalid(f"longer than {MAX_VALUE} characters", "too_long")
    return value


def custom(spec: str) -> tuple[str, str]:
    """``'X-Campaign: spring'`` -> ("X-Campaign", "spring"); Invalid (field header) saying why not."""
    name, colon, value = spec.partition(":")
    shown = repr(spec if len(spec) <= 60 else spec[:57] + "...")
    if not colon or not _NAME.fullmatch(name.strip()) or name != name.strip():
        raise Invalid(
            f"header {shown}: expected 'Name: value', the name of letters, digits and '-'",
            code="header.malformed",
            field="header",
        )
    lower = name.lower()
    if lower in RESERVED or lower.startswith(_RESERVED_PREFIXES):
        raise Invalid(
            f"header {shown}: {name} is written by einmal or the mail system, not by a campaign",
            code="header.reserved",
            field="header",
        )
    return name, _text(value, f"header {name}", "header")


def customs(specs: list[str]) -> list[tuple[str, str]]:
    pairs = [custom(spec) for spec in specs]
    if len(pairs) > MAX_HEADERS:
        raise Invalid(f"header: at most {MAX_HEADERS}", code="header.too_many", field="header")
    names = [name.lower() for name, _ in pairs]
    if len(set(names)) < len(names):
        raise Invalid("header: each name once", code="header.repeated", field="header")
    return pairs


def list_id(value: str) -> tuple[str, str]:
    """``'Name <news.acme.example>'`` or ``'news.acme.example'`` -> (phrase, id); Invalid (field list_id)."""
    value = _text(value, "list_id", "list_id")
    phrase, bracket, rest = value.rpartition("<")
    identifier = rest.removesuffix(">").strip() if bracket else value
    if (bracket and not rest.endswith(">")) or not _LIST_ID.fullmatch(identifier) or len(identifier) > 255:
        raise Invalid(
            f"list_id {value[:60]!r}: expected 'Name <id.example.org>' or 'id.example.org'",
            code="list_id.malformed",
            field="list_id",
        )
    if "<" in phrase or ">" in phrase:
        raise Invalid(f"list_id {value[:60]!r}: one <id> only", code="list_id.malformed", field="list_id")
    return phrase.strip().strip('"').strip(), identifier


def stored_headers(value) -> list[tuple[str, str]]:
    """The campaigns.headers column (a JSON array of [name, value]) as checked pairs."""
    pairs = json.loads(value) if isinstance(value, str) else (value or [])
    return customs([f"{name}: {text}" for name, text in pairs])
