"""Complaints: ARF (RFC 5965) reports, and the multipart/mixed forms some providers send instead.

An ARF report is a ``message/feedback-report`` part (wherever it sits: some providers wrap the
report in a multipart/mixed) whose Feedback-Type says what it is; only ``abuse`` is a complaint.
Hotmail's and Outlook's older feedback loop (JMRP) and other providers send no such part: a
multipart/mixed message whose subject speaks of a complaint or an abuse report, returning the
message complained about (message/rfc822). Either way the returned message's Return-Path, or
ARF's Original-Mail-From, is what may name einmal's row (a verified VERP token in it).
"""

import re
from email.message import Message

from service.inbound.formats.dsn import fields, part_text

_COMPLAINT_SUBJECT = re.compile(
    r"complaint|abuse report|spam report|feedback report|reported as (spam|junk)", re.IGNORECASE
)


def feedback(message: Message) -> dict[str, str] | None:
    """The fields of the message's feedback report (lower-case names), {} for a complaint form without
    one, None when the message is no complaint report."""
    for part in message.walk():
        if part.get_content_type() == "message/feedback-report":
            return {item[0]: item[1] for item in reversed(fields(part_text(part))) if item is not None}
    if message.get_content_maintype() == "multipart" and _COMPLAINT_SUBJECT.search(str(message.get("Subject") or "")):
        returned = [part for part in message.walk() if part.get_content_type() == "message/rfc822"]
        if returned:
            return {"feedback-type": "abuse"}
    return None
