"""Open tracking's pixel (docs/design.md#click-tracking): a campaign made with --track-opens carries in its HTML
body, right after ``<body …>`` (where the hidden link of click tracking goes, clicks.after_body), one 1x1 image
from the node's ``GET /c/o/{token}``, signed per recipient. The text body is left as it is.

The token is ``<account>.<campaign>.<subscriber>.<signature>``, the confirmation link's form (service/mail/
confirm.py) with the HMAC-SHA256 over ``open:<account>:<campaign>:<subscriber>``, keyed with
EINMAL_UNSUBSCRIBE_SECRET and rotated as it is: the first key signs, every key verifies. No unsubscribe,
confirmation or click token is an open's, nor the other way round. The pixel's URL is EINMAL_CLICK_URL's with
``/o/<token>``: the same surface, the same setting.

In the template the pixel's URL is the field ``{{ _click_open }}``, a name no operator's template may use.
"""

import html as html_module

from service.mail import clicks, confirm
from service.mail.templates import LINK_FIELD
from service.mail.unsubscribe import Secret

PURPOSE = "open"
FIELD = LINK_FIELD + "_open"
PIXEL = (
    '<img src="{{ ' + FIELD + ' }}" width="1" height="1" alt="" aria-hidden="true" '
    'style="display:block;width:1px;height:1px;border:0">'
)


def with_pixel(html: str) -> str:
    """The HTML body with the pixel."""
    return clicks.after_body(html, PIXEL)


def verify_token(secret: Secret, token: str) -> tuple[int, int, int] | None:
    """(account_id, campaign_id, subscriber_id) when any key of `secret` signed the pixel's token, else None."""
    return confirm.verify_token(secret, token, PURPOSE)


class Signer:
    """The pixel's URL for one recipient, the key prepared once: ``{"_click_open": url}``."""

    __slots__ = ("_prefix", "_signer", "html_safe")

    def __init__(self, secret: Secret, base_url: str) -> None:
        self._signer = confirm.Signer(secret, PURPOSE)
        self._prefix = base_url.rstrip("/") + "/o/"
        self.html_safe = html_module.escape(self._prefix) == self._prefix  # the token is digits, dots, base64

    def urls(self, account_id: int, campaign_id: int, subscriber_id: int) -> dict[str, str]:
        return {FIELD: self._prefix + self._signer.token(account_id, campaign_id, subscriber_id)}
