"""Why a message failed, and what that does to the address: one table each.

``classify(status, text)`` is a pure function from a status code (an enhanced status such as
``5.1.1``, a basic reply code such as ``550``, or None) and the server's diagnostic text to a
reason. A bounce (service/inbound/bounces.py) calls it with a DSN's Status and Diagnostic-Code or
what a plain-text bounce says; the send path may call it with an SMTP reply (``of_reply``).

The code decides when it is specific (X.1.1 is an unknown address whatever the text adds); the
text decides when the code is generic (X.0.0, X.1.0, X.2.0, X.3.0, X.4.0, X.4.4, X.5.x, or no code at
all), first matching rule of TEXT_RULES wins. X.7.x is policy, or authentication when its code or
text says so: a policy code never becomes an address reason, whatever its text.

| reason | what it says | from | effect, permanent failure | temporary |
|---|---|---|---|---|
| no_mailbox | the address does not exist | X.1.1, X.1.3, X.1.6, "user unknown" | suppress | count |
| no_domain | its domain does not exist | X.1.2, X.1.10, X.4.4 with "host not found" | suppress | count |
| disabled | the mailbox is disabled | X.2.1, "account disabled" | suppress | count |
| mailbox_full | the mailbox is full | X.2.2, "quota exceeded" | count | count |
| policy | blocked by policy, reputation or a spam filter | X.7.x, "blocked", "spam" | none | none |
| authentication | SPF, DKIM or DMARC failed | X.7.20-X.7.29, X.7.515, "DMARC" | none | none |
| content | too large, or its content refused | X.2.3, X.3.4, X.6.x, "virus" | none | none |
| routing | routing or system trouble | X.3.x, X.4.x, X.5.x, "connection timed out" | count | count |
| expired | given up after retries | X.4.7, "expired", a failed 4.x.x | count | count |
| unclassified | none of these | | none | none |

suppress: the address is suppressed at once; count: the report counts toward
EINMAL_SOFT_BOUNCE_LIMIT within EINMAL_SOFT_BOUNCE_DAYS; none: kept for the operator, no effect.
"""

import re

ADDRESS = ("no_mailbox", "no_domain", "disabled")
REASONS = (*ADDRESS, "mailbox_full", "policy", "authentication", "content", "routing", "expired", "unclassified")
COUNTED = ("mailbox_full", "routing", "expired")  # and an address reason of a temporary failure
SUPPRESS, COUNT, NONE = "suppress", "count", "none"

_SPECIFIC = {  # subject.detail of an enhanced status code -> reason, whatever the text
    "1.1": "no_mailbox", "1.3": "no_mailbox", "1.6": "no_mailbox", "1.2": "no_domain", "1.10": "no_domain",
    "2.1": "disabled", "2.2": "mailbox_full", "2.3": "content", "2.4": "routing",
    "3.1": "routing", "3.2": "routing", "3.3": "content", "3.4": "content", "3.5": "routing",
    "4.1": "routing", "4.2": "routing", "4.3": "routing", "4.5": "routing", "4.6": "routing", "4.7": "expired",
}
_SUBJECT = {"1": "no_mailbox", "2": "unclassified", "3": "routing", "4": "routing", "5": "routing", "6": "content"}
_AUTH_CODES = re.compile(r"7\.(2[0-9]|509|515)$")

_P = re.IGNORECASE
TEXT_RULES: tuple[tuple[str, re.Pattern], ...] = (  # (reason, pattern), the first that matches wins
    ("authentication", re.compile(r"\b(spf|dkim|dmarc)\b|unauthenticated|not authenticated|authentication "
                                  r"(failed|required)|sender (domain|address) .{0,40}authenticat", _P)),
    ("policy", re.compile(r"spam|black ?list|block ?list|deny ?list|blocked|reputation|\brbl\b|\bdnsbl\b|"
                          r"policy|prohibited|banned|unsolicited|junk|not permitted|rate limit", _P)),
    ("content", re.compile(r"too (large|big|long)|size (limit|exceed)|exceeds? .{0,30}(size|limit)|"
                           r"message length|virus|malware|attachment|infected", _P)),
    ("mailbox_full", re.compile(r"(mailbox|inbox|account|quota|disk|storage|mail ?box space)[^.\n]{0,40}"
                                r"(full|exceed|over|not enough)|over ?quota|quota exceeded|insufficient "
                                r"(disk )?(space|storage)|exceeded storage", _P)),
    ("disabled", re.compile(r"\b(account|mailbox|user|address)[^.\n]{0,30}\b(disabled|deactivated|suspended|"
                            r"inactive|locked|closed|no longer active|has been terminated)\b", _P)),
    ("no_domain", re.compile(r"host (or domain name )?not found|domain (name )?not found|no such domain|"
                             r"domain .{0,40}(does not|doesn't) exist|unrout(e)?able (mail )?domain|"
                             r"unknown (host|domain)|nxdomain|no mx|name service error|host unknown|"
                             r"bad destination (system|host)|unrout(e)?able address|nameserver error", _P)),
    ("no_mailbox", re.compile(r"user unknown|unknown user|no such (user|mailbox|recipient|address|account|"
                              r"person|local user)|(user|mailbox|recipient|address|account|addressee|"
                              r"e-?mail)[^.\n]{0,40}(does not exist|doesn't exist|not exist|is unknown|unknown|"
                              r"not found|invalid|is not valid|not valid|not a valid|unavailable|"
                              r"no longer (exists|valid|available))|invalid (recipient|mailbox|address|user)|"
                              r"not (a )?(valid|known) (user|recipient|mailbox|address)|no mailbox|"
                              r"recipient (address )?rejected|not listed in|unknown (recipient|local|"
                              r"address|alias)|bad (destination )?mailbox|doesn't have an? .{0,20}account|"
                              r"no (account|user) (by|with) that|no longer (here|with|employed)|"
                              r"not our customer|unknown or illegal alias|deliver to the following recipient "
                              r"failed permanently|invalid address|address rejected", _P)),
    ("expired", re.compile(r"expired|retry (time(out)?|period) exceeded|gave up|giving up|"
                           r"could not be delivered (for|within|in) |time(d)? ?out|too long", _P)),
    ("routing", re.compile(r"connection (refused|reset|timed out|lost)|network|unreachable|mail loop|"
                           r"too many hops|loops back|relay(ing)? (access )?(denied|not permitted)|"
                           r"temporar|try again|system|resources|deferred|local error|lookup fail", _P)),
)

_ENHANCED = re.compile(r"\b([245])\.(\d{1,3})\.(\d{1,3})\b")
_BASIC = re.compile(r"(?<![\d.])([245])[0-9]{2}(?=[ -]|$)", re.MULTILINE)


def classify(status: str | None, text: str = "") -> str:
    """The reason for a failure with `status` (5.1.1, 550 or None) and diagnostic `text` (REASONS)."""
    code = _ENHANCED.search(status or "")
    text = text[:4000]
    if code is not None:
        detail = f"{code[2]}.{code[3]}"
        if code[2] == "7":
            if _AUTH_CODES.match(detail) or TEXT_RULES[0][1].search(text):
                return "authentication"
            return "policy"
        if detail in _SPECIFIC and not (detail == "4.4" or detail.endswith(".0")):
            return _SPECIFIC[detail]
    found = next((reason for reason, pattern in TEXT_RULES if pattern.search(text)), None)
    if found is not None:
        return found
    if code is not None:
        return _SPECIFIC.get(f"{code[2]}.{code[3]}") or _SUBJECT.get(code[2], "unclassified")
    return "unclassified"


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
