"""Mailgun webhooks (the JSON ones: `signature` and `event-data`) at POST /inbound/mailgun (service/webhooks.py).

Mailgun signs each request: `signature.signature` is the hex HMAC-SHA256, keyed with the
webhook signing key (EINMAL_MAILGUN_WEBHOOK_SIGNING_KEY), of `timestamp` followed by `token`.
A wrong signature is refused (403), and so is a timestamp more than MAX_AGE_SECONDS old (Mailgun
retries for up to 8 hours) or more than MAX_AHEAD_SECONDS ahead: a captured request cannot be
replayed later, and within that window a replay is the same event (its id), so it changes nothing.

Events: `failed` with severity permanent is a hard bounce, temporary a soft one; `complained` is
a complaint; every other event is ignored. The id is ``mailgun:<event-data.id>``. The message is
named by `message.headers.message-id` (einmal's Message-ID, when the message went through SMTP
with it) or `envelope.sender` (a VERP token).
"""

import hmac
import logging
import time
from collections.abc import Callable, Mapping
from hashlib import sha256

from service.settings import Settings
from service.webhooks import Event, Rejected, address, event_id, json_object, short, text

log = logging.getLogger("einmal.webhooks")

MAX_AGE_SECONDS = 8 * 3600 + 600
MAX_AHEAD_SECONDS = 600


class Mailgun:
    name = "mailgun"

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.key = settings.mailgun_webhook_signing_key.get_secret_value().encode()
        self.clock = clock

    def verify(self, signed: object) -> None:
        if not isinstance(signed, dict):
            raise Rejected(403, "no signature object")
        timestamp, token = text(signed.get("timestamp"), "timestamp", 20), text(signed.get("token"), "token", 200)
        given = signed.get("signature")
        expected = hmac.new(self.key, f"{timestamp}{token}".encode(), sha256).hexdigest()
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), expected.encode()):
            raise Rejected(403, "the Mailgun signature does not verify")
        if not timestamp.isdigit() or not -MAX_AHEAD_SECONDS <= self.clock() - int(timestamp) <= MAX_AGE_SECONDS:
            raise Rejected(403, f"the Mailgun timestamp {timestamp} is too old or ahead of this clock")

    def events(self, headers: Mapping[str, str], body: bytes) -> list[Event]:
        document = json_object(body)
        self.verify(document.get("signature"))
        data = document.get("event-data")
        if not isinstance(data, dict):
            raise Rejected(400, "no event-data object")
        name, severity = data.get("event"), data.get("severity")
        if name == "complained":
            kind = "complaint"
        elif name == "failed" and severity in ("permanent", "temporary"):
            kind = "hard" if severity == "permanent" else "soft"
        else:
            log.info("webhook mailgun: ignored a %.40r event", f"{name} {severity or ''}".strip())
            return []
        delivery = data.get("delivery-status")
        code = (delivery.get("enhanced-code") or delivery.get("code")) if isinstance(delivery, dict) else None
        status = short(code, "complaint" if kind == "complaint" else f"failed/{severity}")
        message, envelope = data.get("message"), data.get("envelope")
        headers_of = message.get("headers") if isinstance(message, dict) else None
        identities = (headers_of.get("message-id") if isinstance(headers_of, dict) else None,
                      envelope.get("sender") if isinstance(envelope, dict) else None)
        return [Event(kind, status, address(data.get("recipient"), "recipient"),
                      event_id("mailgun", data.get("id"), "id"), tuple(i for i in identities if isinstance(i, str)))]
