"""Postmark bounce and spam complaint webhooks at POST /inbound/postmark (service/inbound/webhooks.py).

Postmark sends HTTP basic auth when the webhook's URL carries it
(``https://user:password@host/inbound/postmark``); each account's ``user:password`` is its
postmark_webhook_secret (service/inbound/webhook_credentials.py; EINMAL_POSTMARK_WEBHOOK_SECRET in a
single-account installation). The credentials are checked from the headers, before einmal reads
the body: a request without them is refused (401). They are all Postmark gives: it signs
nothing, so whoever holds them can post any event for their account, and only for it.

One event per request: RecordType Bounce with Type HardBounce is a hard bounce, SoftBounce a soft
one (every other bounce type — Transient, AutoResponder, DnsError, … — is ignored and counted);
RecordType SpamComplaint is a complaint. Its id is ``postmark:<ID>``. Postmark's MessageID is its
own, not the message's header, and the bounce's Content is what the remote server wrote (anyone
can write a Message-ID there): the event is tied by its Email address alone.
"""

import base64
import binascii
import hmac
import logging
from collections.abc import Mapping

from service.inbound.webhooks import Delivery, Event, Provider, Rejected, address, event_id, json_object, short

log = logging.getLogger("einmal.webhooks")

KINDS = {"HardBounce": "hard", "SoftBounce": "soft"}


class Postmark(Provider):
    name = "postmark"

    def __init__(self, credentials: Mapping[str, str | None]) -> None:
        self.expected = [(credential.encode(), account) for credential, account in credentials.items()]

    def account(self, headers: Mapping[str, str]) -> str | None:
        """The account whose credentials the request's basic auth gives; Rejected (401) when none."""
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        try:
            given = base64.b64decode(credentials.strip(), validate=True)
        except (binascii.Error, ValueError):
            given = b""
        found = [account for expected, account in self.expected if hmac.compare_digest(given, expected)]
        if scheme.lower() != "basic" or not found:
            raise Rejected(401, "wrong or missing basic auth credentials")
        return found[0]

    def check_headers(self, headers: Mapping[str, str]) -> None:
        self.account(headers)

    def read(self, headers: Mapping[str, str], body: bytes) -> Delivery:
        account = self.account(headers)
        record = json_object(body)
        record_type = record.get("RecordType")
        kind: str | None
        if record_type == "SpamComplaint":
            kind = "complaint"
        elif record_type == "Bounce":
            kind = KINDS.get(short(record.get("Type"), ""))
            if kind is None:
                log.info("webhook postmark: ignored a bounce of type %.40r", str(record.get("Type")))
                return Delivery([], account)
        else:
            log.info("webhook postmark: ignored a record of type %.40r", str(record_type))
            return Delivery([], account)
        status = short(record.get("Type"), "complaint" if kind == "complaint" else "bounce")
        return Delivery(
            [Event(kind, status, address(record.get("Email"), "Email"), event_id("postmark", record.get("ID"), "ID"))],
            account,
        )
