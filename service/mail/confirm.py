"""The signed link of a double opt-in confirmation (docs/design.md#api "Double opt-in").

A token names the account, the list's confirmation campaign and the subscriber, in the unsubscribe
token's form (service/mail/unsubscribe.py), ``<account_id>.<campaign_id>.<subscriber_id>.<signature>``,
but its HMAC-SHA256 is over ``confirm:<account_id>:<campaign_id>:<subscriber_id>``: a message's
unsubscribe link cannot be turned into a confirmation, nor the other way round. It is keyed with the same
EINMAL_UNSUBSCRIBE_SECRET, so the same rotation applies: the first key signs, every key verifies.

The same form serves another purpose with a word of its own: an open-tracking pixel's ``open:``
(service/mail/opens.py).
"""

from service.mail import unsubscribe
from service.mail.unsubscribe import Secret

PURPOSE = "confirm"


def _signer(purpose: str):
    def sign(key: bytes, account_id: int, campaign_id: int, subscriber_id: int) -> bytes:
        return unsubscribe.signature(key, f"{purpose}:{account_id}:{campaign_id}:{subscriber_id}")

    return sign


class Signer:
    """The token with the key prepared once (the sender signs one per confirmation message)."""

    __slots__ = ("_mac", "_purpose")

    def __init__(self, secret: Secret, purpose: str = PURPOSE):
        self._mac = unsubscribe.Mac(unsubscribe.signing_key(secret))
        self._purpose = purpose

    def token(self, account_id: int, campaign_id: int, subscriber_id: int) -> str:
        text = f"{self._purpose}:{account_id}:{campaign_id}:{subscriber_id}"
        signature = self._mac.signature(text.encode()).decode()
        return f"{account_id}.{campaign_id}.{subscriber_id}.{signature}"


def verify_token(secret: Secret, token: str, purpose: str = PURPOSE) -> tuple[int, int, int] | None:
    """(account_id, campaign_id, subscriber_id) when any key of `secret` signed the token for `purpose`, else
    None."""
    return unsubscribe.verify_with(_signer(purpose), secret, token)
