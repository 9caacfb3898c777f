"""`einmal account key create|list|revoke`: an account's API keys (service/accounts/keys.py).

A key is printed once, alone on stdout: `KEY=$(einmal account key create …)`."""

import argparse

from service import db
from service.accounts import keys
from service.cli.tables import aligned
from service.settings import Settings


async def create_command(args: argparse.Namespace, settings: Settings) -> int:
    keys.check_name(args.name, "--name")
    async with db.connection(db.url(settings)) as conn:
        key = await keys.mint_for(conn, account=args.account, name=args.name, scope=args.scope)
    print(key)  # the key alone on stdout: `KEY=$(einmal account key create …)`
    return 0


async def list_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        found = await keys.of_account_named(conn, account=args.account)
    table = [
        (
            k.id,
            k.prefix + "…",
            k.scope,
            k.name,
            *(when.isoformat(timespec="seconds") if when else "" for when in (k.created_at, k.used_at, k.revoked_at)),
        )
        for k in found
    ]
    for line in aligned(("id", "prefix", "scope", "name", "created", "last used", "revoked"), table):
        print(line)
    return 0


async def revoke_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        await keys.revoke(conn, account=args.account, key_id=args.id)
    print(f"revoked key {args.id}")
    return 0
