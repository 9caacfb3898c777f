"""VERP: each message's envelope sender names its send row, so a bounce says whom it is about.

With EINMAL_RETURN_PATH=bounces@example.org the envelope sender (MAIL FROM) of the
message for subscriber S of campaign C is

    bounces+C.S.<signature>@example.org

where the signature is the first 16 hex digits (64 bits) of HMAC-SHA256 over ``C:S``, keyed
with the first key of EINMAL_RETURN_PATH_SECRET (else of EINMAL_UNSUBSCRIBE_SECRET). Every
key of the secret verifies, so keys rotate as unsubscribe keys do. The token is lower-case
hex and digits only: mail systems that fold the local part's case still hand back a token
that verifies. The campaign and the subscriber name the send row (sends_one_per_subscriber).

An account with its own return path (einmal.accounts.return_path) signs with its own
return_path_secret (else the environment's secret): ``ReturnPath.of_account``. The inbound
listener verifies a token at an account's return path with that account's keys, and only for
a campaign of that account (service/inbound/bounces.py ``ReturnPaths``).
"""

import hashlib
import hmac
from typing import Protocol

from pydantic import SecretStr

from service.mail import unsubscribe

SIGNATURE_HEX = 16


class Keys(Protocol):
    """What the return path needs of the environment: Settings, or the mail subject's section (Mailing)."""

    @property
    def return_path(self) -> str | None: ...
    @property
    def return_path_secret(self) -> SecretStr | None: ...
    @property
    def unsubscribe_secret(self) -> SecretStr | None: ...


def secret(settings: Keys) -> SecretStr | None:
    return settings.return_path_secret or settings.unsubscribe_secret


def _signature(key: bytes, campaign_id: int, subscriber_id: int) -> str:
    return hmac.new(key, f"{campaign_id}:{subscriber_id}".encode(), hashlib.sha256).hexdigest()[:SIGNATURE_HEX]


class ReturnPath:
    """The return path's parts and keys, prepared once; ``address(C, S)`` is called for every message."""

    __slots__ = ("_keys", "domain", "local")

    def __init__(self, return_path: str, key_source: SecretStr | str) -> None:
        self.local, _, self.domain = return_path.rpartition("@")
        self._keys = unsubscribe.keys(key_source)
        if not self._keys:
            raise ValueError("the return path secret holds no key")

    @classmethod
    def from_settings(cls, settings: Keys) -> "ReturnPath | None":
        if not settings.return_path:
            return None
        key_source = secret(settings)
        if key_source is None:  # Settings refuses a return path without one
            raise ValueError("EINMAL_RETURN_PATH needs EINMAL_RETURN_PATH_SECRET or EINMAL_UNSUBSCRIBE_SECRET")
        return cls(settings.return_path, key_source)

    @classmethod
    def of_account(cls, return_path: str | None, key: SecretStr | None, settings: Keys) -> "ReturnPath | None":
        """An account's own return path (`return_path`, signed with `key`, else the environment's secret);
        the environment's when the account has none."""
        if not return_path:
            return cls.from_settings(settings)
        key_source = key or secret(settings)
        if key_source is None:
            raise ValueError("the account's return path has no secret, nor is EINMAL_RETURN_PATH_SECRET set")
        return cls(unsubscribe.plain_address(return_path, "the account's return path"), key_source)

    def token(self, campaign_id: int, subscriber_id: int) -> str:
        return f"{campaign_id}.{subscriber_id}.{_signature(self._keys[0], campaign_id, subscriber_id)}"

    def address(self, campaign_id: int, subscriber_id: int) -> str:
        return f"{self.local}+{self.token(campaign_id, subscriber_id)}@{self.domain}"

    def verify(self, token: str) -> tuple[int, int] | None:
        """(campaign_id, subscriber_id) when a key of the secret signed the token, else None."""
        if not isinstance(token, str) or len(token) > 80:
            return None
        parts = token.lower().split(".")
        if len(parts) != 3:
            return None
        campaign_id, subscriber_id = (unsubscribe._parse_id(part) for part in parts[:2])
        if campaign_id is None or subscriber_id is None or not parts[2].isascii():
            return None
        matched = False
        for key in self._keys:  # every key, also after a match: the time does not tell which signed
            matched |= hmac.compare_digest(_signature(key, campaign_id, subscriber_id), parts[2])
        return (campaign_id, subscriber_id) if matched else None

    def ours(self, recipient: str) -> tuple[bool, str | None]:
        """(is the recipient the return path's mailbox, its token or None) for an envelope recipient."""
        local, at, domain = recipient.strip().strip("<>").rpartition("@")
        if not at or domain.lower() != self.domain.lower():
            return False, None
        base, plus, token = local.partition("+")
        if base.lower() != self.local.lower():
            return False, None
        return True, (token if plus else None)
