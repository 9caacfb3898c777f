"""A transactional message (a password reset, a receipt) carries no bulk mail's List-Unsubscribe headers unless
its bodies offer the unsubscribe link: mailbox providers show an unsubscribe button on mail that has them, which
for a password reset only invites a person to turn off mail they need. A campaign keeps them."""

from pydantic import SecretStr

from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate
from service.settings import Settings
from tests.mail.test_render import PARSER

SETTINGS = Settings(
    unsubscribe_url="https://news.example.org/unsubscribe",
    unsubscribe_secret=SecretStr("s3cret-for-tests"),
    unsubscribe_mailto="leave@acme.example",
)


def headers(kind: str, text: str) -> set[str]:
    template = CampaignTemplate.compile(
        {
            "id": 42,
            "account_id": 7,
            "name": "reset",
            "subject": "Your password reset",
            "from_address": "Acme <shop@acme.example>",
            "body_text": text,
            "body_html": None,
            "kind": kind,
            "unsubscribe_required": False,
        },
        Mailing.of(SETTINGS),
    )
    return {name for name in PARSER.parsebytes(template.render(1, "ann@example.org", "Ann")).keys()}


def test_a_password_reset_message_has_no_list_unsubscribe_headers() -> None:
    said = headers("message", "Reset your password: https://shop.example/reset/abc\n")
    assert not {"List-Unsubscribe", "List-Unsubscribe-Post"} & said, said


def test_a_message_offering_the_link_and_a_campaign_keep_them() -> None:
    assert {"List-Unsubscribe", "List-Unsubscribe-Post"} <= headers("message", "Leave: {{ unsubscribe_url }}\n")
    assert {"List-Unsubscribe", "List-Unsubscribe-Post"} <= headers("campaign", "Leave: {{ unsubscribe_url }}\n")
    assert {"List-Unsubscribe", "List-Unsubscribe-Post"} <= headers("campaign", "News without the link\n")
