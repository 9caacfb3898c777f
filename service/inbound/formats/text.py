"""Bounces without a DSN: the human-readable notice, read for addresses, codes and diagnostics.

Exim ("This message was created automatically by mail delivery software", the address indented
with the diagnostic under it, X-Failed-Recipients), qmail ("Hi. This is the qmail-send program",
``<address>:`` then the reason), Sendmail without DSN ("----- The following addresses had
permanent fatal errors -----"), Postfix without DSN (``<address>: host … said: 550 …``), Exchange
and Office 365 (``Your message to … couldn't be delivered``, often HTML), Gmail, Yahoo and AOL,
Google Groups, OpenSMTPD, GMX, mail.ru and the like all write one paragraph per failed address
before a copy of the message. So, for any of them:

1. the notice is the message's own text parts (HTML without its tags), never a returned message,
   cut where a copy of the message begins (CUT);
2. its recipients are the addresses it names, but for the mail system's own (postmaster,
   MAILER-DAEMON), the bounce's From and To, and the sender of the message it returns;
3. each recipient's diagnostic is its paragraph (its line and the lines under it), or the next
   paragraphs when that says nothing, else the whole notice; its status the first code there.
   Permanent unless the code is 4.x.x or the notice says the message is only delayed.
"""

import html
import re
from email.message import Message

from service.inbound.formats import ADDRESS, MAX_TEXT, Finding, decoded, dsn
from service.smtp import reasons

_P = re.IGNORECASE
CUT = re.compile(
    r"^[ \t>|*=_-]*(?:original message|returned message|unsent message|undelivered message|"
    r"this is a copy of|below this line is a copy|message (?:text|headers) follows?|"
    r"(?:the )?(?:original|returned) (?:message|mail) (?:follows|headers)|here is a copy|"
    r"text of the (?:returned|original)|returned mail follows|headers of the original|"
    r"(?:a )?copy of (?:the|your) (?:original )?message|original message header|"
    r"the header of the original|orginal message|original mail as follows|received:\s+from\b|"
    r"(?:returned|original|unsent) (?:mail|message)s?[ \t=:-]*$)",
    _P | re.MULTILINE,
)
_HEADERS = re.compile(
    r"^(?:return-path|received|from|sender|reply-to|errors-to|message-id|date|subject|to|cc):", _P | re.MULTILINE
)
FROM_SYSTEM = re.compile(
    r"mailer-daemon|postmaster|mail ?delivery|delivery (?:sub)?system|mdaemon|mailer|"
    r"\bndr\b|system administrator|bounce|daemon|\bimss\b|antivirus|mail ?server",
    _P,
)
FAILURE_SUBJECT = re.compile(
    r"undeliver|undelivered|delivery (?:status )?(?:notification|failure|failed|report|problem|has failed|"
    r"warning)|returned mail|mail delivery failed|failure notice|could not be deliver|non-?delivery|"
    r"failed mail|mail error|not delivered|delayed|processing error|returning message|rejected mail|"
    r"automatically rejected|nicht zustellbar|unzustellbar|non remis|no entregad|mail system error|"
    r"warning: .{0,40}(?:delay|not (?:yet )?been delivered)|delivery failure|permanent delivery|"
    r"unknown user|user unknown|failed delivery|error during delivery|mail failed|nameserver error|"
    r"could not send",
    _P,
)
AUTO_REPLY = re.compile(
    r"auto(?:matic)?[- ]?(?:reply|response|antwort|responder)|out of (?:the )?office|"
    r"abwesen|vacation|away from|absence|on leave|r[eé]ponse automatique",
    _P,
)
# a notice that the server still tries: wins over the words of failure such a notice also uses
TEMPORARY = re.compile(
    r"\bdelay|will (?:be )?retr|will (?:keep|continue) (?:on )?trying|still (?:being )?"
    r"(?:tr|retr)|not yet been delivered|is being retried|attempts will continue|"
    r"will continue to (?:be made|try)|delivery warning|warning:? .{0,60}(?:delay|not (?:yet )?been "
    r"delivered|retr)",
    _P,
)
# a failure the server itself took for temporary until it stopped trying (Exim's "retry timeout exceeded", qmail's
# "in the queue too long", OpenSMTPD's "Envelope expired", Amazon SES and WorkMail's "Message expired")
GAVE_UP = re.compile(
    r"retry time ?out exceeded|retry time not reached for any host after a long failure|"
    r"has been in the queue too long|envelope expired|message expired|"
    r"not delivered within \d+ days?(?: and \d+ hours?)?",
    _P,
)
# what a notice that returns our message (or a mailing list server's, X-MLServer) says when its subject and
# sender say nothing: au by KDDI's "Could not be delivered to: <…> As their mailbox is full", fml's "You are
# not a member of this mailing list <…>" and its loop alerts
NOTICE = re.compile(
    r"^\s*could not be delivered to:|not a member of this mailing list|duplicated message-id|"
    r"detected a loop condition",
    _P | re.MULTILINE,
)
PERMANENT = re.compile(
    r"permanent|fatal|given up|giving up|gave up|could(?: not|n't) be deliver|undeliver|"
    r"(?:was|were|could) not (?:be )?delivered|rejected|(?:delivery|mail) (?:has )?failed|"
    r"failed to deliver|(?:could not|unable to|cannot) deliver|did not (?:reach|receive)|"
    r"returned to sender|returning message|failure|does not exist|unknown|has been returned|"
    r"not delivered|aborted|\berror\b",
    _P,
)
_SYSTEM = re.compile(
    r"^(?:postmaster|mailer-daemon|mail-daemon|mailerdaemon|abuse|noreply|no-reply|"
    r"root|hostmaster|webmaster)@",
    _P,
)
_NOT_RECIPIENT = re.compile(
    r"(?:\b(?:message-id|in-reply-to|references|from|sender|reply-to|errors-to|"
    r"return-path|envelope-from|smtp\.mailfrom|id|mailto:|sent by)|https?://\S*)"
    r"[\s:=<\"(]*$",
    _P,
)
# a DSN field quoting what a server said: an address there is the server's, a recipient only when no other is named
_QUOTED_BY = re.compile(r"\s*(?:diagnostic-code|x-postfix-sender|remote-mta|reporting-mta):", _P)
_LEADS = re.compile(r"\s*<?" + ADDRESS.pattern + r">?:")  # a line that begins with an address: its recipient's
_ALIAS_OF = re.compile(r"\bgenerated from[\s:<\"(]*$", _P)  # Exim: the address an alias expanded from
_REFUSED = re.compile(r"(?<![\d.])5\d\d[ -]")  # a 5xx reply quoted: refused for good, whatever the queue said
_TAG = re.compile(r"<(?:br|p|div|tr|li|h\d)\b[^>]*>", _P)


def notice(message: Message) -> str:
    """The text a mail system wrote for people: its text parts, not those of the message it returns."""
    texts: list[str] = []

    def walk(part: Message, depth: int) -> None:
        kind = part.get_content_type()
        if kind in ("message/rfc822", "text/rfc822-headers", "message/rfc822-headers") or depth > 10:
            return
        if part.is_multipart():
            for sub in part.get_payload() or []:
                if isinstance(sub, Message):
                    walk(sub, depth + 1)
        elif kind == "text/plain" or (kind == "text/html" and not texts):
            text = decoded(part)
            if kind == "text/html":
                text = html.unescape(re.sub(r"<[^>]*>", "", _TAG.sub("\n", text)))
            texts.append(text)

    walk(message, 0)
    text = "\n\n".join(texts)[:MAX_TEXT]
    cut = CUT.search(text)
    return text[: cut.start()] if cut else text


def is_bounce(message: Message, text: str) -> bool:
    """A notice of failure (by its sender, subject or fields), not an auto-reply or other mail."""
    subject = str(message.get("Subject") or "")
    if message.get("X-Failed-Recipients") or any(part.get_content_type() in dsn.TYPES for part in message.walk()):
        return True
    if message.get_content_type() == "multipart/report" and str(message.get_param("report-type")).lower() in (
        "delivery-status",
        "disposition-notification",
    ):
        return True
    failure = FAILURE_SUBJECT.search(subject) is not None
    if AUTO_REPLY.search(subject) and not failure:
        return False
    if failure or FROM_SYSTEM.search(str(message.get("From") or "")) is not None:
        return True
    returns = message.get("X-MLServer") is not None or any(
        part.get_content_type() == "message/rfc822" for part in message.walk()
    )
    return returns and NOTICE.search(text) is not None


def own(message: Message) -> set[str]:
    """Addresses of the bounce itself, never a failed recipient: its From and To (the return path)."""
    return {
        a.lower()
        for name in ("From", "To", "Sender", "Reply-To", "Return-Path", "Delivered-To", "X-Original-To")
        for a in ADDRESS.findall(str(message.get(name) or ""))
    }


def senders(message: Message, text: str) -> set[str]:
    """The sender of the message a bounce returns: a failed recipient only when the notice names no other."""
    found: set[str] = set()
    for part in message.walk():
        kind = part.get_content_type()
        payload = part.get_payload()
        if kind == "message/rfc822" and isinstance(payload, list) and payload:
            returned = payload[0]  # a message/rfc822 part holds one Message
            assert isinstance(returned, Message)
            found |= {
                a.lower()
                for name in ("From", "Sender", "Return-Path", "Reply-To")
                for a in ADDRESS.findall(str(returned.get(name) or ""))
            }
    rest = text[text.lower().find("\nfrom:") :] if "\nfrom:" in text.lower() else ""
    found |= {
        a.lower()
        for line in rest.splitlines()[:40]
        if re.match(r"(from|sender|return-path):", line, _P)
        for a in ADDRESS.findall(line)
    }
    return found


def _recipients(notice_text: str, excluded: set[str], weak: set[str]) -> list[tuple[str, int]]:
    """(address, index of its line) of each address the notice names as a recipient, first mention; the
    `weak` ones, and the address an alias expanded from, only when it names no other."""
    lines, seen = notice_text.splitlines(), set()
    found: list[tuple[str, int]] = []
    fallback: list[tuple[str, int]] = []
    for n, line in enumerate(lines):
        for match in ADDRESS.finditer(line):
            address = match[0].strip(".")
            key, before = address.lower(), line[: match.start()]
            if key in seen or key in excluded or _SYSTEM.match(address):
                continue
            alias = _ALIAS_OF.search(before) is not None or _QUOTED_BY.match(line) is not None
            if not alias and (
                _NOT_RECIPIENT.search(before) or (_HEADERS.match(line.strip()) and not line.lower().startswith("to:"))
            ):
                continue
            seen.add(key)
            (fallback if alias or key in weak else found).append((address, n))
    return found or fallback


def _paragraphs(lines: list[str], start: int) -> list[str]:
    """The paragraph of line `start` from that line on, then each next one."""
    out, current = [], []
    for line in lines[start:]:
        if line.strip():
            current.append(line.strip())
        elif current:
            out.append(" ".join(current))
            current = []
        if len(out) >= 3:
            break
    if current:
        out.append(" ".join(current))
    return out


def said_of(text: str, address: str | None) -> str:
    """What a notice says of one recipient: the paragraph naming `address` and the next one (where Exim
    and Postfix say at which command the server refused), "" when it does not name it."""
    if not address:
        return ""
    at = text.lower().find(address.lower())
    if at < 0:
        return ""
    start = text.rfind("\n", 0, at) + 1
    lines = text[start : start + 4000].splitlines()
    # up to the next recipient's own line (``other@example.org: 550 …``, OpenSMTPD's, without a blank line)
    end = next(
        (n for n, line in enumerate(lines) if n and _LEADS.match(line) and address.lower() not in line.lower()), None
    )
    return " ".join(_paragraphs(lines[:end], 0)[:2])[:2000]


def returned_to(message: Message) -> str | None:
    """The one address the returned message's To names, if it names exactly one: a recipient only as a
    last resort (service/inbound/bounces.py keeps it only when the VERP token's row agrees)."""
    for part in message.walk():
        payload = part.get_payload()
        if part.get_content_type() == "message/rfc822" and isinstance(payload, list):
            returned = payload[0] if payload else None
            found = ADDRESS.findall(str(returned.get("To") or "")) if isinstance(returned, Message) else []
            return found[0] if len(found) == 1 else None
    return None


def read(message: Message) -> list[Finding] | None:
    """The Findings of a bounce without delivery status fields; None when the message is no bounce."""
    text = notice(message)
    if not is_bounce(message, text):
        return None
    excluded, weak = own(message), senders(message, text)
    lines = text.splitlines()
    subject = str(message.get("Subject") or "")
    head = f"{subject}\n{text[:3000]}"
    permanent = PERMANENT.search(head) is not None or NOTICE.search(head) is not None
    temporary = TEMPORARY.search(head) is not None
    listed = _recipients(text, excluded, weak)
    # the addresses on the lines that say what failed, where the notice has such lines (not its guide's)
    listed = [(a, n) for a, n in listed if NOTICE.search(lines[n])] or listed
    failed = ADDRESS.findall(str(message.get("X-Failed-Recipients") or ""))
    if failed:
        keys = {a.lower() for a in failed}
        listed = [(a, n) for a, n in listed if a.lower() in keys] or [(a, 0) for a in failed]
    findings = []
    starts = sorted({n for _a, n in listed})
    for address, n in listed[:100]:
        # its paragraph ends where the next recipient's line begins (OpenSMTPD lists them without blank lines)
        end = next((m for m in starts if m > n), len(lines))
        paragraphs = _paragraphs(lines[:end], n)
        diagnostic = paragraphs[0] if paragraphs else ""
        for more in paragraphs[1:]:
            if reasons.status_in(diagnostic) or reasons.classify(None, diagnostic) != "unclassified":
                break
            diagnostic = f"{diagnostic} {more}"
        if not reasons.status_in(diagnostic) and reasons.classify(None, diagnostic) == "unclassified":
            diagnostic = f"{diagnostic} {' '.join(text.split())}"
        findings.append(_finding(address, diagnostic[:2000], permanent, temporary))
    if not findings:
        findings.append(_finding(None, " ".join(text.split())[:2000], permanent, temporary))
    return findings


def _finding(address: str | None, diagnostic: str, permanent: bool, temporary: bool) -> Finding:
    """Permanent for a 5xx code; for a 4xx one only when the notice says it gave up; without a code, as
    the notice says (None: it does not say)."""
    status = reasons.status_in(diagnostic)
    if status is not None and status[0] == "5":
        verdict: bool | None = True
    elif status is not None and status[0] == "4":
        verdict = permanent and not temporary
    else:
        verdict = False if temporary else True if permanent else None
    if (
        verdict
        and GAVE_UP.search(diagnostic)
        and (status is None or status[0] == "4" or (status.endswith(".0.0") and not _REFUSED.search(diagnostic)))
    ):
        return Finding(
            False, status if status and status[0] in "45" else None, _bare(address), diagnostic, gave_up=True
        )
    return Finding(verdict, status if status and status[0] in "45" else None, _bare(address), diagnostic)


def _bare(address: str | None) -> str | None:
    """An address without what servers write before it (``SMTP=``, ``rfc822;``) or quotes around it."""
    if address is None:
        return None
    return re.sub(r"^(?:smtp|rfc822|x400|ex)[=:;]", "", address.strip("'`\"."), flags=_P) or None
