"""A domain two accounts were given before domains were reserved (migration 0120 keeps such rows): each account's
mail from it is signed with that account's own key, never the other's (service/accounts/identity.py reads an
account's keys only; service/mail/render.py signs with what it is given). dkimpy verifies each message against
its own account's record."""

import asyncpg
import dkim as dkimpy
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from service.accounts import identity
from service.mail import dkim
from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate
from tests.identity.test_two_accounts import pem, signed_by
from tests.mail.test_render import campaign, make_settings

pytestmark = pytest.mark.anyio


async def test_two_accounts_given_one_domain_each_sign_with_their_own_key(conn: asyncpg.Connection) -> None:
    keys = {"alpha": ed25519.Ed25519PrivateKey.generate(), "beta": rsa.generate_private_key(65537, 2048)}
    ids = {}
    await conn.execute("ALTER TABLE einmal.account_domains DISABLE TRIGGER account_domains_reserved")
    for name, key in keys.items():  # as an installation made before the rule could have
        ids[name] = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)
        await conn.execute(
            "INSERT INTO einmal.account_domains (account_id, domain, selectors, keys) VALUES ($1, 'shared.example', "
            "$2, $3)",
            ids[name],
            [f"{name}2026"],
            [pem(key)],
        )
    await conn.execute("ALTER TABLE einmal.account_domains ENABLE TRIGGER account_domains_reserved")
    records = {f"{name}2026._domainkey.shared.example": dkim.public_record(key) for name, key in keys.items()}

    def dnsfunc(name, timeout=5):
        return records.get((name.decode() if isinstance(name, bytes) else name).rstrip("."))

    for name in keys:
        sender = await identity.of_account(conn, account_id=ids[name])
        template = CampaignTemplate.compile(
            campaign(account_id=ids[name], from_address="News <news@shared.example>"),
            Mailing.of(make_settings()),
            sender,
        )
        data = template.render(1, "jane@example.org", "Jane")
        # its own selector, and its own key's record verifies it: signed by the other's key, it would not
        assert signed_by(data) == ("shared.example", f"{name}2026")
        assert dkimpy.verify(data, dnsfunc=dnsfunc, minkey=1024)
