"""Amazon SES bounce and complaint notifications, delivered by SNS to POST /inbound/ses (service/inbound/webhooks.py).

SNS signs each message with RSA: SignatureVersion 1 is SHA1withRSA, 2 is SHA256withRSA, over
the canonical string of its fields, each as ``Name\\nvalue\\n`` in this order: Message, MessageId,
Subject (when present), Timestamp, TopicArn, Type for a Notification; Message, MessageId,
SubscribeURL, Timestamp, Token, TopicArn, Type for a SubscriptionConfirmation or
UnsubscribeConfirmation. einmal cannot fetch the SigningCertURL (it reaches no outside host), so
it checks the signature against the certificate(s) in EINMAL_SES_CERTIFICATE_FILE (PEM; several
when AWS rotates it). SNS signs every AWS account's messages in a region with that certificate,
so a verified signature says only that SNS sent the message; whose it is, the TopicArn says: each
account's topics are its ses_topic_arn (service/inbound/webhook_credentials.py; EINMAL_SES_TOPIC_ARN in a
single-account installation), /inbound/ses is not served without one (ConfigError at start-up),
and a message from any other topic is refused (403). So is a message whose (signed) Timestamp,
when SNS published it, is more than MAX_AGE_SECONDS old or MAX_AHEAD_SECONDS ahead: SNS retries
an HTTP/S delivery for an hour at most. Within that window a replay is the same message: the
signature covers all of it, so it is the same events, and they change nothing.

- SubscriptionConfirmation: logged with its SubscribeURL, for the operator to visit; 200.
- Notification whose Message is an SES notification (``notificationType``, or ``eventType`` for
  configuration-set events): Bounce with bounceType Permanent is a hard bounce, Transient a soft
  one (Undetermined: ignored); Complaint is a complaint. One event per recipient, id
  ``ses:<feedbackId>`` (``ses:<feedbackId>:<address>`` when it names several). The original
  message is named by ``mail.source`` (the envelope sender: a VERP token) and its Message-ID
  (``mail.commonHeaders.messageId`` and ``mail.headers``).
"""

import base64
import binascii
import datetime
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from service.addresses import email_key
from service.errors import ConfigError
from service.inbound.webhooks import Delivery, Event, Provider, Rejected, address, event_id, json_object, short, text
from service.settings import Settings

log = logging.getLogger("einmal.webhooks")

NOTIFICATION_FIELDS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
CONFIRMATION_FIELDS = ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type")
HASHES = {"1": hashes.SHA1, "2": hashes.SHA256}
MAX_RECIPIENTS = 100
MAX_AGE_SECONDS = 3600 + 600  # SNS's longest HTTP/S retry policy, and clocks ten minutes apart
MAX_AHEAD_SECONDS = 600


def certificates(settings: Settings) -> list[rsa.RSAPublicKey]:
    """The public keys of EINMAL_SES_CERTIFICATE_FILE; ConfigError (one line) when it cannot be used."""
    path = settings.ses_certificate_file
    assert path is not None  # the SES webhook is set up only when it is set
    try:
        found = x509.load_pem_x509_certificates(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError(f"EINMAL_SES_CERTIFICATE_FILE: cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise ConfigError(f"EINMAL_SES_CERTIFICATE_FILE: {path} holds no PEM certificate") from None
    keys = [key for cert in found if isinstance(key := cert.public_key(), rsa.RSAPublicKey)]
    if len(keys) < len(found):
        raise ConfigError(f"EINMAL_SES_CERTIFICATE_FILE: {path}: SNS signs with RSA; a certificate has another key")
    return keys


def canonical(message: dict) -> bytes:
    fields = NOTIFICATION_FIELDS if message.get("Type") == "Notification" else CONFIRMATION_FIELDS
    lines = []
    for name in fields:
        if name not in message and name == "Subject":
            continue
        value = message.get(name)
        if not isinstance(value, str):
            raise Rejected(400, f"SNS message without {name}")
        lines.append(f"{name}\n{value}\n")
    return "".join(lines).encode()


class Ses(Provider):
    name = "ses"

    def __init__(
        self, settings: Settings, topics: Mapping[str, str | None], clock: Callable[[], float] = time.time
    ) -> None:
        self.keys = certificates(settings)
        if not topics:
            raise ConfigError(
                "EINMAL_SES_TOPIC_ARN: /inbound/ses needs the SNS topics it accepts (SNS signs every "
                "AWS account's messages with one certificate): set it, or each account's ses_topic_arn "
                "in EINMAL_WEBHOOK_ACCOUNTS_FILE"
            )
        self.topics, self.clock = dict(topics), clock

    def verify(self, message: dict) -> str | None:
        """The account whose topic published the genuine, recent `message`; else Rejected (403)."""
        algorithm = HASHES.get(str(message.get("SignatureVersion")))
        if algorithm is None:
            raise Rejected(403, f"SNS SignatureVersion {str(message.get('SignatureVersion'))[:10]!r} is not 1 or 2")
        try:
            signature = base64.b64decode(text(message.get("Signature"), "Signature", 4096), validate=True)
        except binascii.Error:
            raise Rejected(403, "the SNS Signature is not base64") from None
        signed = canonical(message)
        for key in self.keys:
            try:
                key.verify(signature, signed, padding.PKCS1v15(), algorithm())
                break
            except InvalidSignature:
                continue
        else:
            raise Rejected(403, "the SNS signature does not verify against EINMAL_SES_CERTIFICATE_FILE")
        topic = short(message.get("TopicArn"), "", 256)
        if topic not in self.topics:
            raise Rejected(403, f"SNS topic {str(message.get('TopicArn'))[:200]!r} is no account's")
        try:
            published = datetime.datetime.fromisoformat(message["Timestamp"])
        except ValueError:
            published = None
        if published is None or published.tzinfo is None:
            raise Rejected(403, f"the SNS Timestamp {message['Timestamp'][:40]!r} is not a time in UTC")
        if not -MAX_AHEAD_SECONDS <= self.clock() - published.timestamp() <= MAX_AGE_SECONDS:
            raise Rejected(403, f"the SNS Timestamp {message['Timestamp'][:40]!r} is too old or ahead of this clock")
        return self.topics[topic]

    def read(self, headers: Mapping[str, str], body: bytes) -> Delivery:
        message = json_object(body)
        kind = message.get("Type")
        if kind not in ("Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation"):
            raise Rejected(400, f"SNS message of Type {str(kind)[:40]!r}")
        account = self.verify(message)
        if kind != "Notification":
            url = text(message.get("SubscribeURL"), "SubscribeURL", 2000)
            log.warning(
                "webhook ses: %s for topic %s: to confirm it, visit %s", kind, str(message.get("TopicArn"))[:200], url
            )
            return Delivery([], account)
        return Delivery(_ses_events(json_object(message["Message"], "the SNS Message")), account)


def _identities(mail: object) -> tuple[str, ...]:
    if not isinstance(mail, dict):
        return ()
    found = [mail.get("source")]
    common = mail.get("commonHeaders")
    if isinstance(common, dict):
        found.append(common.get("messageId"))
    headers = mail.get("headers")
    if isinstance(headers, list):
        found += [
            h.get("value")
            for h in headers[:200]
            if isinstance(h, dict) and str(h.get("name")).lower() in ("message-id", "return-path")
        ]
    return tuple(value for value in found if isinstance(value, str))


def _recipients(block: dict, field: str) -> list[dict]:
    recipients = block.get(field)
    if (
        not isinstance(recipients, list)
        or not recipients
        or len(recipients) > MAX_RECIPIENTS
        or not all(isinstance(r, dict) for r in recipients)
    ):
        raise Rejected(400, f"{field} is not a list of recipients")
    return recipients


def _ses_events(notification: dict) -> list[Event]:
    kind = notification.get("notificationType") or notification.get("eventType")
    identities = _identities(notification.get("mail"))
    if kind == "Bounce":
        block = notification.get("bounce")
        if not isinstance(block, dict):
            raise Rejected(400, "a Bounce without its bounce object")
        bounce_type = block.get("bounceType")
        severity = {"Permanent": "hard", "Transient": "soft"}.get(short(bounce_type, ""))
        entries = _recipients(block, "bouncedRecipients")
        found = [(address(r.get("emailAddress"), "emailAddress"), r.get("status")) for r in entries]
        general = short(f"{bounce_type}/{block.get('bounceSubType')}", "bounce", 60)
        statuses = [short(status, general) for _, status in found]
        recipients = [a for a, _ in found]
    elif kind == "Complaint":
        block = notification.get("complaint")
        if not isinstance(block, dict):
            raise Rejected(400, "a Complaint without its complaint object")
        severity = "complaint"
        recipients = [
            address(r.get("emailAddress"), "emailAddress") for r in _recipients(block, "complainedRecipients")
        ]
        statuses = [short(block.get("complaintFeedbackType"), "complaint")] * len(recipients)
    else:
        log.info("webhook ses: ignored a notification of type %.40r", str(kind))
        return []
    if severity is None:
        log.info("webhook ses: ignored a bounce of type %.40r", str(bounce_type))
        return []
    base = event_id("ses", block.get("feedbackId"), "feedbackId")
    return [
        Event(
            severity, status, recipient, base if len(recipients) == 1 else f"{base}:{email_key(recipient)}", identities
        )
        for recipient, status in zip(recipients, statuses, strict=True)
    ]
