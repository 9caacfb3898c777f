"""Mailgun webhooks (the JSON ones: `signature` and `event-data`) at POST /inbound/mailgun
(service/inbound/webhooks.py).

Mailgun signs each request: `signature.signature` is the hex HMAC-SHA256, keyed with the
webhook signing key, of `timestamp` followed by `token` — and of nothing else: the event beside
it is not signed. Each account's key is its mailgun_webhook_signing_key
(service/inbound/webhook_credentials.py; EINMAL_MAILGUN_WEBHOOK_SIGNING_KEY in a single-account
installation); the key the signature verifies with says whose the event is. Refused (403): a
signature no key verifies; a timestamp more than MAX_AGE_SECONDS old (Mailgun retries for up to
8 hours) or more than MAX_AHEAD_SECONDS ahead; and a token already used with another event (each
token is kept in einmal.webhook_tokens, with the hash of its event, while its timestamp could be
accepted), so a captured signature carries no other event. Within the window the same request
again (Mailgun's retry) is the same event: it changes nothing.

Events: `failed` with severity permanent is a hard bounce, temporary a soft one; `complained` is
a complaint; every other event is ignored. The id is ``mailgun:<event-data.id>``. The message is
named by `message.headers.message-id` (einmal's Message-ID, when the message went through SMTP
with it) or `envelope.sender` (a VERP token): Mailgun's record of the message it sent for us.
"""

import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping
from hashlib import sha256

from service.inbound.webhooks import Delivery, Event, Provider, Rejected, address, event_id, json_object, short, text

log = logging.getLogger("einmal.webhooks")

MAX_AGE_SECONDS = 8 * 3600 + 600
MAX_AHEAD_SECONDS = 600


class Mailgun(Provider):
    name = "mailgun"

    def __init__(self, keys: Mapping[str, str | None], clock: Callable[[], float] = time.time) -> None:
        self.keys = [(key.encode(), account) for key, account in keys.items()]
        self.clock = clock

    def verify(self, signed: object) -> tuple[str | None, str, int]:
        """(the account whose key verifies the signature, its token, its timestamp); else Rejected (403)."""
        if not isinstance(signed, dict):
            raise Rejected(403, "no signature object")
        timestamp, token = text(signed.get("timestamp"), "timestamp", 20), text(signed.get("token"), "token", 200)
        given = signed.get("signature")
        given = given.encode() if isinstance(given, str) else b""
        signed_by = [
            (hmac.new(key, f"{timestamp}{token}".encode(), sha256).hexdigest(), account) for key, account in self.keys
        ]
        found = [account for expected, account in signed_by if hmac.compare_digest(given, expected.encode())]
        if not found:
            raise Rejected(403, "the Mailgun signature does not verify")
        if not timestamp.isdigit() or not -MAX_AHEAD_SECONDS <= self.clock() - int(timestamp) <= MAX_AGE_SECONDS:
            raise Rejected(403, f"the Mailgun timestamp {timestamp} is too old or ahead of this clock")
        return found[0], token, int(timestamp)

    def read(self, headers: Mapping[str, str], body: bytes) -> Delivery:
        document = json_object(body)
        account, token, timestamp = self.verify(document.get("signature"))
        events = self._events(document)
        try:  # the event as JSON again, keys sorted: a retry that writes it otherwise is the same event
            digest = sha256(json.dumps(document["event-data"], sort_keys=True).encode()).hexdigest()
        except (ValueError, RecursionError):
            raise Rejected(400, "event-data that cannot be written as JSON again") from None
        # kept past its window by MAX_AHEAD_SECONDS, so that a clock behind the database's cannot take it again
        return Delivery(events, account, (f"mailgun:{token}", digest, timestamp + MAX_AGE_SECONDS + MAX_AHEAD_SECONDS))

    def _events(self, document: dict) -> list[Event]:
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
        identities = (
            headers_of.get("message-id") if isinstance(headers_of, dict) else None,
            envelope.get("sender") if isinstance(envelope, dict) else None,
        )
        return [
            Event(
                kind,
                status,
                address(data.get("recipient"), "recipient"),
                event_id("mailgun", data.get("id"), "id"),
                tuple(i for i in identities if isinstance(i, str)),
            )
        ]
