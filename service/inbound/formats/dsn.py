"""RFC 3464 delivery status fields, read as servers write them rather than as the RFC says.

Read leniently: an Action with a comment (``failed (Bad destination mailbox address)``) or
``expired``; per-message and per-recipient fields in one block without a blank line (AOL); a part
cut short; several recipients, a new one beginning where a recipient field comes again; a Status
missing or unreadable, taken from the Diagnostic-Code; Original-Recipient (the address einmal sent
to) and Final-Recipient (after an alias or forwarding) both kept.
"""

import re
from email.message import Message

from service.inbound.formats import MAX_TEXT, Finding, clean_address, decoded
from service.smtp import reasons

TYPES = ("message/delivery-status", "message/global-delivery-status")
_FIELD = re.compile(r"([A-Za-z][A-Za-z0-9-]{0,40})[ \t]*:[ \t]*(.*)")
_RECIPIENT = {
    "original-recipient",
    "final-recipient",
    "action",
    "status",
    "diagnostic-code",
    "remote-mta",
    "last-attempt-date",
    "will-retry-until",
    "x-actual-recipient",
    "x-display-name",
}
_FAILED = ("fail", "expired", "error", "undeliverable", "bounce")


def part_text(part: Message) -> str:
    """A delivery-status part as text, whether the email package read its blocks or not."""
    payload = part.get_payload()
    if isinstance(payload, list):
        blocks = [
            "\n".join(f"{name}: {value}" for name, value in block.items())
            for block in payload
            if isinstance(block, Message)
        ]
        return "\n\n".join(blocks)[:MAX_TEXT]
    return decoded(part)


def fields(text: str) -> list[tuple[str, str] | None]:
    """(lower-case name, value) of each field in order, None at each blank line; folded lines joined."""
    found: list[tuple[str, str] | None] = []
    for line in text.splitlines():
        if not line.strip():
            found.append(None)
        elif line[0] in " \t" and found and found[-1] is not None:
            name, value = found[-1]
            found[-1] = (name, f"{value} {line.strip()}")
        elif (field := _FIELD.match(line)) is not None:
            found.append((field[1].lower(), field[2].strip()))
    return found


def recipients(text: str) -> list[dict[str, str]]:
    """Each recipient's fields: a recipient ends at a blank line, or where one of its fields comes again."""
    groups: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for item in [*fields(text), None]:
        if item is None or (item[0] in current and item[0] in _RECIPIENT):
            if current:
                groups.append(current)
            current = {}
        if item is not None and item[0] in _RECIPIENT:
            current[item[0]] = item[1]
    return groups


def finding(group: dict[str, str]) -> Finding | None:
    """A recipient's Finding; None for a delivery, a relay, an expansion, or fields naming no outcome."""
    action = group.get("action", "").lower()
    diagnostic = group.get("diagnostic-code", "").partition(";")[2].strip() or group.get("diagnostic-code", "")
    status = reasons.status_in(group.get("status", ""))
    if status is None or status.endswith(".0.0"):  # a generic Status: the diagnostic's code may say more
        status = reasons.status_in(diagnostic) or status
    if action.startswith("delay"):
        permanent = False
    elif action.startswith(_FAILED):
        permanent = not (status or "").startswith("4")
    elif not action and status and status[0] in "45":
        permanent = status[0] == "5"
    else:
        return None
    original = clean_address(
        group.get("original-recipient", "").partition(";")[2] or group.get("original-recipient", "")
    )
    final = clean_address(group.get("final-recipient", "").partition(";")[2] or group.get("final-recipient", ""))
    recipient = original or final
    also = tuple(a for a in (final,) if a and recipient and a.lower() != recipient.lower())
    if action.startswith("expired") and status is None:
        status = "4.4.7"
    gave_up = not permanent and not action.startswith("delay")
    return Finding(permanent, status, recipient, diagnostic[:1000], also, gave_up)


def read(message: Message) -> list[Finding] | None:
    """The Findings of a message's delivery-status parts; None when it has none."""
    parts = [part for part in message.walk() if part.get_content_type() in TYPES]
    if not parts:
        return None
    found = [finding(group) for part in parts[:4] for group in recipients(part_text(part))]
    return [f for f in found if f is not None]


def postfix_sender(message: Message) -> str | None:
    """The envelope sender Postfix's X-Postfix-Sender field names (per message), if any."""
    for part in message.walk():
        if part.get_content_type() in TYPES:
            for item in fields(part_text(part)):
                if item is not None and item[0] == "x-postfix-sender":
                    return clean_address(item[1].partition(";")[2] or item[1])
    return None
