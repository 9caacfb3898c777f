"""Postmark bounce and spam complaint webhooks at POST /inbound/postmark (service/webhooks.py).

Postmark sends HTTP basic auth when the webhook's URL carries it
(``https://user:password@host/inbound/postmark``); EINMAL_POSTMARK_WEBHOOK_SECRET holds that
``user:password``, and a request without it is refused (401). One event per request:
RecordType Bounce with Type HardBounce is a hard bounce, SoftBounce a soft one (every other bounce
type — Transient, AutoResponder, DnsError, … — is ignored and counted); RecordType SpamComplaint is
a complaint. Its id is ``postmark:<ID>``. Postmark's MessageID is its own, not the message's
header: the message is named only when the bounce's Content (the full dump, when the server
includes it) holds einmal's Message-ID; else the event is tied by its Email address.
"""

import base64
import binascii
import hmac
import logging
import re
from collections.abc import Mapping

from service.settings import Settings
from service.webhooks import Event, Rejected, address, event_id, json_object, short

log = logging.getLogger("einmal.webhooks")

_MESSAGE_ID = re.compile(r"^Message-ID:\s*(<campaign\.\d+\.\d+@[^<>\s]+>)", re.I | re.M)
KINDS = {"HardBounce": "hard", "SoftBounce": "soft"}
MAX_CONTENT = 256 * 1024  # of the bounce dump, searched for einmal's Message-ID


class Postmark:
    name = "postmark"

    def __init__(self, settings: Settings) -> None:
        self.expected = settings.postmark_webhook_secret.get_secret_value().encode()

    def verify(self, headers: Mapping[str, str]) -> None:
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        try:
            given = base64.b64decode(credentials.strip(), validate=True)
        except (binascii.Error, ValueError):
            given = b""
        if scheme.lower() != "basic" or not hmac.compare_digest(given, self.expected):
            raise Rejected(401, "wrong or missing basic auth credentials")

    def events(self, headers: Mapping[str, str], body: bytes) -> list[Event]:
        self.verify(headers)
        record = json_object(body)
        record_type = record.get("RecordType")
        if record_type == "SpamComplaint":
            kind = "complaint"
        elif record_type == "Bounce":
            kind = KINDS.get(short(record.get("Type"), ""))
            if kind is None:
                log.info("webhook postmark: ignored a bounce of type %.40r", str(record.get("Type")))
                return []
        else:
            log.info("webhook postmark: ignored a record of type %.40r", str(record_type))
            return []
        status = short(record.get("Type"), "complaint" if kind == "complaint" else "bounce")
        content = record.get("Content")
        identities = tuple(_MESSAGE_ID.findall(content[:MAX_CONTENT])) if isinstance(content, str) else ()
        return [Event(kind, status, address(record.get("Email"), "Email"),
                      event_id("postmark", record.get("ID"), "ID"), identities)]

