"""One-click unsubscribe tokens (RFC 8058 links).

A token names one recipient of one campaign and proves that einmal made it:

    <account_id>.<campaign_id>.<subscriber_id>.<signature>

where the signature is HMAC-SHA256, keyed with EINMAL_UNSUBSCRIBE_SECRET, over the
text ``<account_id>:<campaign_id>:<subscriber_id>``, in unpadded url-safe base64.
Every character is url-safe, so the token goes into a query string unquoted.
The ids are not secret; the signature is what the unsubscribe endpoint must check,
with ``verify_token``.

Rotation: EINMAL_UNSUBSCRIBE_SECRET may hold several keys, comma-separated. The
first signs; every one verifies, so links in mail already delivered keep working
while a new key is introduced. Removing a key retires (expires) the links it signed.
Tokens carry no time of their own.

A test message (`einmal campaign test`) carries a token for TEST_SUBSCRIBER, which names nobody.

A bulk campaign (kind 'campaign' or a sequence's 'step', not a list's confirmations) goes out only with a
one-click unsubscribe, which Gmail and Yahoo require of bulk senders, unless it was created without one on purpose
(`--no-unsubscribe`, the API's "unsubscribe": false): ``without_one_click`` says why not, for a node
(which pauses it) and for `campaign create` and `approve` (which refuse it).
"""

import binascii
import hashlib
import hmac
from collections.abc import Mapping

from pydantic import SecretStr

from service.addresses import address_problem
from service.errors import EinmalError
from service.mail.mailing import Mailing

Secret = SecretStr | str | bytes

# the subscriber a test message's token names (`einmal campaign test`): no subscriber has id 0, so its
# link unsubscribes nobody; the page says it came from a test message
TEST_SUBSCRIBER = 0

_URLSAFE = bytes.maketrans(b"+/", b"-_")
_MAX_ID_DIGITS = 19  # a PostgreSQL bigint


def keys(secret: Secret) -> list[bytes]:
    """The keys in a secret: comma-separated, each stripped of surrounding spaces; empty ones dropped."""
    if isinstance(secret, SecretStr):
        secret = secret.get_secret_value()
    raw = secret.encode() if isinstance(secret, str) else secret
    return [key for key in (part.strip() for part in raw.split(b",")) if key]


def signing_key(secret: Secret) -> bytes:
    """The signing key: the first one."""
    found = keys(secret)
    if not found:
        raise ValueError("the unsubscribe secret holds no key")
    return found[0]


def signature(key: bytes, text: str) -> bytes:
    """HMAC-SHA256 of `text` in unpadded url-safe base64."""
    mac = hmac.digest(key, text.encode(), hashlib.sha256)
    return binascii.b2a_base64(mac, newline=False).translate(_URLSAFE).rstrip(b"=")


def _signature(key: bytes, account_id: int, campaign_id: int, subscriber_id: int) -> bytes:
    return signature(key, f"{account_id}:{campaign_id}:{subscriber_id}")


_BLOCK = 64  # SHA-256's block size, in bytes (RFC 2104's B)


class Mac:
    """``signature`` with the key prepared once: the HMAC-SHA256 of RFC 2104 (what ``hmac.digest`` computes) from
    the key's inner and outer hash states, made once; per message two hash copies instead of a key schedule (4 µs
    instead of 17 on the loaded bench machine, `python -m bench.dbcost`'s node)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))

    def signature(self, text: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(text)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return binascii.b2a_base64(outer.digest(), newline=False).translate(_URLSAFE).rstrip(b"=")


class Signer:
    """make_token with the key prepared once: the sender calls it for every message."""

    __slots__ = ("_mac",)

    def __init__(self, secret: Secret):
        self._mac = Mac(signing_key(secret))

    def token(self, account_id: int, campaign_id: int, subscriber_id: int) -> str:
        signature = self._mac.signature(b"%d:%d:%d" % (account_id, campaign_id, subscriber_id)).decode()
        return f"{account_id}.{campaign_id}.{subscriber_id}.{signature}"


def make_token(secret: Secret, account_id: int, campaign_id: int, subscriber_id: int) -> str:
    return Signer(secret).token(account_id, campaign_id, subscriber_id)


def one_click_missing(mailing: Mailing) -> list[str]:
    """The settings this process still needs for a one-click unsubscribe (RFC 8058: a List-Unsubscribe https
    link and List-Unsubscribe-Post); [] when it has one. A mailto alone is no one-click unsubscribe."""
    return [
        name
        for name, value in (
            ("EINMAL_UNSUBSCRIBE_URL", mailing.unsubscribe_url),
            ("EINMAL_UNSUBSCRIBE_SECRET", mailing.unsubscribe_secret),
        )
        if not value
    ]


def without_one_click(campaign: Mapping, mailing: Mailing, explicitly: str = "--no-unsubscribe") -> str | None:
    """Why ``campaign`` may not go out from a process with ``mailing``: it is bulk mail that must carry a
    one-click unsubscribe and its settings give none. None when it may. ``explicitly``: how the operator
    says a campaign may go without: the node's own word, the command line's option, by default; the field
    `unsubscribe`, last, for an error a surface words (service/errors.py, `refused`)."""
    if campaign.get("kind", "campaign") not in ("campaign", "step") or campaign.get("unsubscribe_required") is False:
        return None
    if not (missing := one_click_missing(mailing)):
        return None
    return (
        f"no one-click unsubscribe, which Gmail and Yahoo require of bulk mail ({' and '.join(missing)} "
        f"not set): set EINMAL_UNSUBSCRIBE_URL and EINMAL_UNSUBSCRIBE_SECRET, or create the campaign with "
        f"{explicitly}"
    )


def require_one_click(campaign: Mapping, mailing: Mailing, refused: type[EinmalError], said: str) -> None:
    """`refused` ("`said`: why") when ``campaign`` may not go out from this process (without_one_click), about
    the field unsubscribe: each surface says how a campaign goes without (service/errors.py)."""
    if reason := without_one_click(campaign, mailing, "unsubscribe"):
        raise refused(f"{said}: {reason}", code="unsubscribe.required", field="unsubscribe")


def _parse_id(text: str) -> int | None:
    """A canonical non-negative decimal: no sign, no leading zero, no non-ASCII digit."""
    if not (0 < len(text) <= _MAX_ID_DIGITS and text.isascii() and text.isdigit()):
        return None
    if len(text) > 1 and text[0] == "0":
        return None
    return int(text)


def verify_token(secret: Secret, token: str) -> tuple[int, int, int] | None:
    """(account_id, campaign_id, subscriber_id) when the token was signed by any key of `secret`, else None."""
    return verify_with(_signature, secret, token)


def verify_with(sign, secret: Secret, token: str) -> tuple[int, int, int] | None:
    """verify_token for tokens of this form whose signature `sign(key, account, campaign, subscriber)` makes."""
    ids = verify_ids(sign, secret, token, 3)
    return (ids[0], ids[1], ids[2]) if ids is not None else None


def verify_ids(sign, secret: Secret, token: str, count: int) -> tuple[int, ...] | None:
    """The `count` ids of a token ``<id>.….<id>.<signature>`` when `sign(key, *ids)` by any key of `secret` is
    its signature, else None (verify_with's three ids; a click link's four, service/mail/clicks.py)."""
    if not isinstance(token, str) or len(token) > 200:
        return None
    parts = token.split(".")
    if len(parts) != count + 1:
        return None
    ids: list[int] = []
    for part in parts[:count]:
        if (value := _parse_id(part)) is None:
            return None
        ids.append(value)
    if not parts[count].isascii():
        return None
    given = parts[count].encode()
    # every key is tried, also after a match: the time taken does not tell which key signed
    matched = False
    for key in keys(secret):
        matched |= hmac.compare_digest(sign(key, *ids), given)
    return tuple(ids) if matched else None


def link(base_url: str, token: str) -> str:
    """The unsubscribe URL: base_url plus ``?token=`` (``&token=`` when it has a query)."""
    if "?" in base_url:
        separator = "" if base_url.endswith(("?", "&")) else "&"
    else:
        separator = "?"
    return f"{base_url}{separator}token={token}"


def plain_address(value: str, what: str) -> str:
    """An account's unsubscribe mailto or return path as it goes into a header or MAIL FROM: a plain ASCII
    address (what EINMAL_UNSUBSCRIBE_MAILTO must be); ValueError naming `what` otherwise."""
    value = value.strip()
    problem = address_problem(value)
    if problem is not None or not value.isascii() or any(c in value for c in "<>?&%, "):
        raise ValueError(f"{what} must be a plain ASCII address" + (f" ({problem})" if problem else ""))
    return value
