"""Standard Webhooks signatures (https://www.standardwebhooks.com): a secret is `whsec_` and base64 of 24
random bytes; each delivery carries `webhook-id` (the event's id, the same on every attempt),
`webhook-timestamp` (seconds since the epoch, of this attempt) and `webhook-signature`: `v1,` and base64 of the
HMAC-SHA256, keyed with the secret's bytes, of `id.timestamp.body`, one per secret, space-separated (during a
rotation window, the new secret's and the previous one's)."""

import base64
import hashlib
import hmac
import secrets

PREFIX = "whsec_"


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def signature(secret: str, event_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix(PREFIX))
    signed = f"{event_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def headers(event_id: str, timestamp: int, body: bytes, secrets_: list[str]) -> list[tuple[bytes, bytes]]:
    """The request's headers, signed with each of `secrets_` (the current one first)."""
    signed = " ".join(signature(s, event_id, timestamp, body) for s in secrets_)
    return [
        (b"content-type", b"application/json"),
        (b"user-agent", b"einmal-webhooks/1"),
        (b"webhook-id", event_id.encode()),
        (b"webhook-timestamp", str(timestamp).encode()),
        (b"webhook-signature", signed.encode()),
    ]
