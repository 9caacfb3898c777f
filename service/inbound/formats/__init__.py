"""What a bounce says, read from the formats mail servers really write, one module per format.

Each reader returns Findings: for each recipient a report names, its address (as einmal sent to it,
and any other spelling the report gives), whether the failure is permanent, the status code and the
server's diagnostic. service/inbound/bounces.py turns them into Reports; what a Finding says never
decides which send row a report may touch (docs/design.md#inbound-events).

- dsn.py: RFC 3464 delivery status fields, read leniently (comments after Action, ``expired``,
  fields without blank lines between them, truncated parts, several recipients);
- text.py: the human-readable notices of servers that write no DSN (Exim, qmail, Sendmail,
  Postfix, Exchange and Office 365, Gmail, Yahoo and AOL, Google Groups, OpenSMTPD, GMX, mail.ru…);
- arf.py: complaints, RFC 5965 and the multipart/mixed forms some providers send.
"""

import re
from dataclasses import dataclass
from email.message import Message

MAX_TEXT = 64 * 1024  # characters of a notice read; a notice is a few hundred
ADDRESS = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})+")


@dataclass(frozen=True)
class Finding:
    permanent: bool | None  # True: failed for good; False: delayed or 4.x.x; None: cannot tell
    status: str | None  # 5.1.1, 550, or None
    recipient: str | None  # the address einmal sent to, as the report gives it
    diagnostic: str = ""
    also: tuple[str, ...] = ()  # other addresses the report gives the recipient (Final-Recipient of an alias)
    gave_up: bool = False  # failed after temporary failures (a 4.x.x Status): the server stopped trying


def decoded(part: Message) -> str:
    """A leaf part's text, its transfer encoding undone, at most MAX_TEXT characters."""
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        payload = str(part.get_payload() or "").encode("utf-8", "replace")
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload[: MAX_TEXT * 2].decode(charset, "replace")[:MAX_TEXT]
    except LookupError:  # an unknown charset
        return payload[: MAX_TEXT * 2].decode("latin-1")[:MAX_TEXT]


def clean_address(text: str) -> str | None:
    found = ADDRESS.search(text or "")
    return found[0].strip(".") if found else None
