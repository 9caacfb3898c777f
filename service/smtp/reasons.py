"""Why a message failed, and what that does to the address: one table each.

``classify(status, text)`` is a pure function from a status code (an enhanced status such as
``5.1.1``, a basic reply code such as ``550``, or None) and the server's diagnostic text to a
reason. A bounce (service/inbound/bounces.py) calls it with a DSN's Status and Diagnostic-Code or
what a plain-text bounce says; the send path may call it with an SMTP reply (``of_reply``).

Who was refused comes first: a failure at or before ``MAIL FROM`` (Exim's "after MAIL FROM", Postfix's
"in reply to MAIL FROM command", an X.1.7 or X.1.8 code) or one whose words are about the sender ("Sender
address rejected", "sender verify failed") is about us, never the recipient: reason ``sender``, a
configuration problem for the operator, no effect on the address. A report that names our return path in
its diagnostic is read the same way (service/inbound/reports.py, which knows that address).

Then the code and the words, in this order of precedence:

1. X.1.7, X.1.8 (either the report's Status or the diagnostic's own code): sender.
2. X.7.x (either code): policy, or authentication when its code or text says so. A policy code never
   becomes an address reason, whatever its text.
3. A specific code (the diagnostic's own code before a generic Status: ``Status: 5.1.1`` with
   ``552 5.2.2 Over quota`` is a full mailbox) decides, unless it is an address code and the words say
   something more specific that is not about the address: a statement of policy, reputation, rate,
   authentication, content, a full mailbox, the sender, or a temporary failure ("try again", "temporar",
   SERVFAIL) wins over a 5.1.1 or 5.2.1, which servers send for anything.
4. A generic code (X.0.0, X.1.0, X.2.0, X.3.0, X.4.0, X.4.4, X.5.x) or none: the first matching rule of
   TEXT_RULES, ordered so that a block, a rate, the sender, a quota or a temporary failure is read before
   any address rule; else the code's subject.

| reason | what it says | from | effect, permanent failure | temporary |
|---|---|---|---|---|
| no_mailbox | the address does not exist | X.1.1, X.1.3, X.1.6, "user unknown" | suppress | count |
| no_domain | its domain does not exist | X.1.2, X.1.10, X.4.4 with "host not found" | suppress | count |
| disabled | the mailbox is disabled | X.2.1, "account disabled" | suppress | count |
| mailbox_full | the mailbox is full | X.2.2, "quota exceeded" | count | count |
| sender | our sender or return path was refused | X.1.7, X.1.8, at MAIL FROM, "sender rejected" | none | none |
| policy | blocked by policy, reputation, a rate limit or a spam filter | X.7.x, "blocked", "rate" | none | none |
| authentication | SPF, DKIM or DMARC failed | X.7.20-X.7.29, X.7.515, "DMARC" | none | none |
| content | too large, or its content refused | X.2.3, X.3.4, X.6.x, "virus" | none | none |
| routing | routing, system or temporary trouble | X.3.x, X.4.x, X.5.x, "try again" | count | count |
| expired | given up after retries | X.4.7, "expired", a failed 4.x.x | count | count |
| unclassified | none of these | | none | none |

suppress: the address is suppressed at once; count: the report counts toward
EINMAL_SOFT_BOUNCE_LIMIT within EINMAL_SOFT_BOUNCE_DAYS; none: kept for the operator, no effect.
"""

import re
from typing import Literal, get_args

Reason = Literal[
    "no_mailbox",
    "no_domain",
    "disabled",
    "mailbox_full",
    "sender",
    "policy",
    "authentication",
    "content",
    "routing",
    "expired",
    "unclassified",
]
REASONS: tuple[str, ...] = get_args(Reason)
ADDRESS = REASONS[:3]  # the address's own: no_mailbox, no_domain, disabled
COUNTED = ("mailbox_full", "routing", "expired")  # and an address reason of a temporary failure
SUPPRESS, COUNT, NONE = "suppress", "count", "none"

_SPECIFIC = {  # subject.detail of an enhanced status code -> reason, whatever the text
    "1.1": "no_mailbox",
    "1.3": "no_mailbox",
    "1.6": "no_mailbox",
    "1.2": "no_domain",
    "1.10": "no_domain",
    "1.7": "sender",
    "1.8": "sender",
    "2.1": "disabled",
    "2.2": "mailbox_full",
    "2.3": "content",
    "2.4": "routing",
    "3.1": "routing",
    "3.2": "routing",
    "3.3": "content",
    "3.4": "content",
    "3.5": "routing",
    "4.1": "routing",
    "4.2": "routing",
    "4.3": "routing",
    "4.5": "routing",
    "4.6": "routing",
    "4.7": "expired",
}
_SUBJECT = {"1": "no_mailbox", "2": "unclassified", "3": "routing", "4": "routing", "5": "routing", "6": "content"}
_AUTH_CODES = re.compile(r"7\.(2[0-9]|509|515)$")

# The rules are matched against the diagnostic lower-cased once (``classify``), so they are written in lower
# case: patterns without IGNORECASE search about three times faster, and a report is read by up to ten.
# the words that say the failure is about us, or is only temporary: never an address reason
SENDER = re.compile(
    r"\bsender\b[^.\n]{0,40}?\b(?:rejected|refused|denied|invalid|not (?:valid|allowed|accepted|"
    r"permitted|found)|unknown|verif\w*|does not exist|no such|domain)|"
    r"\b(?:mail from|envelope.from|return.path)\b[^.\n]{0,30}?\b(?:rejected|refused|denied|invalid)|"
    r"after (?:pipelined )?mail from|in reply to mail from|"
    r"after (?:initial connection|ehlo|helo|starttls)|in reply to (?:ehlo|helo|the initial)|"
    # a mailing list that takes posts from its members only (fml: "You are not a member of this mailing list")
    r"not a member of (?:this|the) (?:mailing )?list|\bnot member article from"
)
TEMPORARY = re.compile(
    r"try (?:again|later)|temporar|servfail|server failure|duplicated message-id|loop (?:alert|back|detected)|"
    r"malformed or unexpected name server "
    r"reply|(?:dns|lookup|name ?server)[^.\n]{0,20}tim(?:e ?out|ed out)|resend .{0,30}later"
)
TEXT_RULES: tuple[tuple[str, re.Pattern], ...] = (  # (reason, pattern), the first that matches wins
    (
        "authentication",
        re.compile(
            r"\b(spf|dkim|dmarc)\b|unauthenticated|not authenticated|authentication "
            r"(failed|required)|sender (domain|address) .{0,40}authenticat"
        ),
    ),
    (
        "policy",
        re.compile(
            r"spam|black ?list|block ?list|deny ?list|blocked|reputation|\brbl\b|\bdnsbl\b|"
            r"policy|prohibited|banned|unsolicited|junk|not permitted|rate limit|\brate\b|"
            r"too many (?:recipients|messages|connections|e-?mails)|sending (?:limit|quota)|"
            r"(?:per|this) hour|throttl|too fast"
        ),
    ),
    ("sender", SENDER),
    (
        "content",
        re.compile(
            r"too (large|big|long)|size (limit|exceed)|exceeds? .{0,30}(size|limit)|"
            r"message length|virus|malware|attachment|infected"
        ),
    ),
    (
        "mailbox_full",
        re.compile(
            r"(mailbox|inbox|account|quota|disk|storage|mail ?box space)[^.\n]{0,40}"
            r"(full|exceed|over|not enough)|over ?quota|quota exceeded|"
            r"exceeds? (?:the |its |your )?(?:mailbox |disk |storage )?quota|insufficient "
            r"(disk )?(space|storage)|exceeded storage"
        ),
    ),
    ("routing", TEMPORARY),
    (
        "disabled",
        re.compile(
            r"\b(account|mailbox|user|address)[^.\n]{0,30}\b(disabled|deactivated|suspended|"
            r"inactive|locked|closed|no longer active|has been terminated)\b"
        ),
    ),
    (
        "no_domain",
        re.compile(
            r"host (or domain name )?not found|domain (name )?not found|no such domain|"
            r"domain .{0,40}(does not|doesn't) exist|unrout(e)?able (mail )?domain|"
            r"unknown (host|domain)|nxdomain|no mx|name service error|host unknown|"
            r"bad destination (system|host)|unrout(e)?able address|nameserver error"
        ),
    ),
    (
        "no_mailbox",
        re.compile(
            r"user unknown|unknown user|no such (user|mailbox|recipient|address|account|"
            r"person|local user)|(user|mailbox|recipient|address|account|addressee|"
            r"e-?mail)[^.\n]{0,40}(does not exist|doesn't exist|not exist|is unknown|unknown|"
            r"not found|invalid|is not valid|not valid|not a valid|unavailable|"
            r"no longer (exists|valid|available))|invalid (recipient|mailbox|address|user)|"
            r"not (a )?(valid|known) (user|recipient|mailbox|address)|no mailbox|"
            r"recipient (address )?rejected|not listed in|unknown (recipient|local|"
            r"address|alias)|bad (destination )?mailbox|doesn't have an? .{0,20}account|"
            r"no (account|user) (by|with) that|no longer (here|with|employed)|"
            r"not our customer|unknown or illegal alias|deliver to the following recipient "
            r"failed permanently|invalid address|address rejected"
        ),
    ),
    (
        "expired",
        re.compile(
            r"expired|retry (time(out)?|period) exceeded|gave up|giving up|"
            r"could not be delivered (for|within|in) |time(d)? ?out|too long"
        ),
    ),
    (
        "routing",
        re.compile(
            r"connection (refused|reset|timed out|lost)|network|unreachable|mail loop|"
            r"too many hops|loops back|relay(ing)? (access )?(denied|not permitted)|"
            r"temporar|try again|system|resources|deferred|local error|lookup fail"
        ),
    ),
)

# the rules whose words overrule an address code (step 3): all those before the address rules
OVERRULING = frozenset(pattern for _, pattern in TEXT_RULES[:6])

_ENHANCED = re.compile(r"\b([245])\.(\d{1,3})\.(\d{1,3})\b")
_BASIC = re.compile(r"(?<![\d.])([245])[0-9]{2}(?=[ -]|$)", re.MULTILINE)


def classify(status: str | None, text: str = "") -> str:
    """The reason for a failure with `status` (5.1.1, 550 or None) and diagnostic `text` (REASONS), by the
    precedence of the module's docstring."""
    text = text[:4000].lower()
    codes = [c for c in (_ENHANCED.search(status or ""), _ENHANCED.search(text)) if c is not None]
    details = [f"{c[2]}.{c[3]}" for c in codes]
    if any(d in ("1.7", "1.8") for d in details):
        return "sender"
    if any(c[2] == "7" for c in codes):
        if any(_AUTH_CODES.match(d) for d in details) or TEXT_RULES[0][1].search(text):
            return "authentication"
        return "policy"
    said, overrules = _said(text)
    specific = [_SPECIFIC[d] for d in details if d in _SPECIFIC and not (d == "4.4" or d.endswith(".0"))]
    if specific:  # the diagnostic's own code after the Status: prefer one that is not about the address
        reading = next((r for r in specific if r not in ADDRESS), specific[0])
        if reading in ADDRESS and overrules and said is not None:  # overrules: the words said something
            return said
        return reading
    if said is not None:
        return said
    if codes:
        return _SPECIFIC.get(details[0]) or _SUBJECT.get(codes[0][2], "unclassified")
    return "unclassified"


def _said(text: str) -> tuple[str | None, bool]:
    """What the words alone say (the first rule of TEXT_RULES that matches, None if none), and whether
    that overrules an address code (OVERRULING)."""
    for reason, pattern in TEXT_RULES:
        if pattern.search(text):
            return reason, pattern in OVERRULING
    return None, False


def effect(kind: str, reason: str) -> str:
    """What a report does to its address: SUPPRESS at once, COUNT toward the soft bounce limit, or NONE.
    `kind`: hard (a permanent failure), soft (a temporary one), complaint or unclassified."""
    if kind == "complaint":
        return SUPPRESS
    if kind not in ("hard", "soft") or reason not in REASONS:
        return NONE
    if reason in ADDRESS:
        return SUPPRESS if kind == "hard" else COUNT
    return COUNT if reason in COUNTED else NONE


def status_in(text: str) -> str | None:
    """The first enhanced status code in `text` (5.1.1), else its first reply code (550), else None."""
    found = _ENHANCED.search(text) or _BASIC.search(text)
    return found[0] if found else None


def of_reply(reply: str) -> tuple[str, str]:
    """(kind, reason) of an SMTP reply such as ``550 5.7.26 Unauthenticated email``: hard for 5xx,
    soft for 4xx; the send path may act on the reason as a bounce would."""
    status = status_in(reply) or ""
    kind = "hard" if status.startswith("5") else "soft" if status.startswith("4") else "unclassified"
    return kind, classify(status, reply)
