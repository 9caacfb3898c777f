"""The key of a mailbox: one string however its address is spelled.

`email_key(address)` is the only place einmal decides when two addresses are
one mailbox. Its result is what the `email_lower` columns hold — of
einmal.subscribers, einmal.sends and einmal.suppressions — so the recipient
build (one send row per key and campaign: `sends_one_per_address`), the
suppressions (`einmal suppress`, inbound events, 5.1.x bounces) and every
claim-time check compare keys, never raw addresses. It is computed here, in
Python, where the address enters einmal (import, suppress, inbound), and
never by PostgreSQL: `lower()` there depends on the database's LC_CTYPE
(with `C` it leaves `Ü` alone) and PostgreSQL knows nothing of IDNA.

The rules, applied to the part before the last `@` (the local part) and the
part after it (the domain) separately:

- Local part: Unicode canonical caseless matching (the Unicode Standard,
  §3.13: case folding of the canonical decomposition), then NFC. So NFC and
  NFD spellings are one, `ANNA` is `anna`, `Ü` is `ü`, the final sigma `ς`
  is `σ` — and, as full case folding does, `ß` is `ss`. The result does not
  depend on any locale.
- Domain: UTS #46 mapping, non-transitional (what IDNA 2008 resolvers do:
  lower case, NFC, full-width forms and the ideographic full stop mapped;
  `ß` stays `ß`), then every valid A-label (`xn--…`) decoded to its U-label.
  The key's domain is therefore the Unicode form: `bücher.example` for both
  `BÜCHER.EXAMPLE` and `xn--bcher-kva.example`. A label that is not a valid
  A-label stays as it is (lower case); a domain UTS #46 refuses (a code point
  IDNA disallows) is folded like a local part.
- No `@` at all (a suppression may name anything): the whole text is folded
  like a local part.

The key is idempotent: `email_key(email_key(a)) == email_key(a)`. The
address itself (`email`) is kept as written and is what a message is sent
to; when several spellings of one mailbox are on a campaign's lists, the
oldest confirmed subscriber's spelling is used.

How an address goes out (docs/design.md#message-identity): `ascii_address(a)` is its
all-ASCII form, the domain as its A-label (`hans@xn--bcher-kva.example`),
for an envelope to a relay without SMTPUTF8; `header_address(a)` is what the
To and From headers carry: that same ASCII form whenever the local part is
ASCII, so the message needs no SMTPUTF8 (RFC 5322 headers are ASCII), and the
address as written only when the local part is not (RFC 6532: such a message
needs SMTPUTF8 anyway).

Whether a text is an address at all: `address_problem(a)` says why it is not
(RFC 5322 syntax, as email_validator reads it; no DNS), `normalized_address(a)`
is the address as email_validator normalises it. The importer, `einmal
suppress`, the campaign commands and the settings all ask these two.
"""

import functools
import re
import unicodedata

import idna
from email_validator import SPECIAL_USE_DOMAIN_NAMES, EmailNotValidError, validate_email

_ACE_PREFIX = "xn--"


def email_key(address: str) -> str:
    """The key of the mailbox `address` names (see the module's rules)."""
    if address.isascii() and _ACE_PREFIX not in address.lower():
        return address.lower()  # what the rules make of ASCII without an A-label: case folded, nothing else
    return _key(address)


def _key(address: str) -> str:
    local, at, domain = address.rpartition("@")
    if not at:
        return _fold(address)
    return f"{_fold(local)}@{_domain_key(domain)}"


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", text).casefold())


def _domain_key(domain: str) -> str:
    try:
        mapped = idna.uts46_remap(domain, std3_rules=False, transitional=False)
    except idna.IDNAError:
        return _fold(domain)
    return unicodedata.normalize("NFC", ".".join(_u_label(label) for label in mapped.split(".")))


def _u_label(label: str) -> str:
    if not label.startswith(_ACE_PREFIX):  # uts46_remap has lowered it
        return label
    try:
        return idna.ulabel(label)  # only the canonical A-label of a valid U-label decodes
    except (idna.IDNAError, UnicodeError):
        return label


@functools.lru_cache(maxsize=4096)
def ascii_address(address: str) -> str:
    """``address`` with an international domain as its A-label (hans@bücher.example ->
    hans@xn--bcher-kva.example). ValueError when the local part is not ASCII (only SMTPUTF8 can
    carry it) or the domain is no valid international name."""
    if address.isascii():
        return address
    local, at, domain = address.rpartition("@")
    if not local.isascii():
        raise ValueError(f"address {address!r} has a non-ASCII local part: it needs SMTPUTF8")
    try:
        return local + at + idna.encode(domain, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise ValueError(f"address {address!r}: the domain is not a valid international name ({exc})") from None


def header_address(address: str) -> str:
    """The address as a To or From header carries it: ``ascii_address`` when the local part is
    ASCII, else (a non-ASCII local part, or a domain that is no valid name) as written."""
    if address.isascii():
        return address
    try:
        return ascii_address(address)
    except ValueError:
        return address


# email_validator refuses special-use domains even with deliverability checks off;
# `.test` it allows in its test environment. The others are syntactically fine names,
# so an address ending in one is checked with that last label read as `test`.
_SPECIAL = frozenset(SPECIAL_USE_DOMAIN_NAMES) - {"test"}


def normalized_address(address: str) -> str:
    """`address` as email_validator normalises it (the domain lower-cased); EmailNotValidError
    when it is not a syntactically valid email address.

    Syntax only: no DNS; any domain syntax is allowed, dotless (`localhost`) and
    special-use ones (`.test`, `.invalid`, `.local`, …) included."""
    last = address.rpartition("@")[2].rpartition(".")[2]
    special = last.lower() in _SPECIAL
    if special:
        address = address[: len(address) - len(last)] + "test"
    normalized = validate_email(
        address, check_deliverability=False, test_environment=True, globally_deliverable=False
    ).normalized
    return normalized[: -len("test")] + last.lower() if special else normalized


def address_problem(address: str) -> str | None:
    """Why `address` is not a syntactically valid email address (normalized_address), or None."""
    if _plain(address):
        return None
    return _problem(address)


def _problem(address: str) -> str | None:
    try:
        normalized_address(address)
    except EmailNotValidError as exc:
        return str(exc)
    return None


# Most addresses are plain: a local part of ASCII letters, digits and `_+-` in dot-separated runs, a domain
# of ASCII letters, digits and hyphens in dot-separated labels, none of them an A-label. email_validator's
# verdict on such an address is its domain's (the local part is a dot-atom, of any length when not strict;
# the address's length is checked here as it checks it: no normalisation changes it), so the domain is asked
# once, with a local part of one letter, and the answer kept (tests/core/test_address_fast_path.py holds the
# two to one answer for every input). Anything else is asked whole.
_PLAIN = re.compile(r"[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*@((?:[A-Za-z0-9-]+\.)*[A-Za-z0-9-]+)")
_MAX_ADDRESS = 254  # email_validator's EMAIL_MAX_LENGTH


def _plain(address: str) -> bool:
    """Whether `address` is plain (see above) and email_validator takes it."""
    plain = _PLAIN.fullmatch(address)
    if plain is None or len(address) > _MAX_ADDRESS:
        return False
    domain = plain.group(1)
    return _ACE_PREFIX not in domain.lower() and _domain_taken(domain)


@functools.lru_cache(maxsize=4096)
def _domain_taken(domain: str) -> bool:
    return _problem(f"a@{domain}") is None
