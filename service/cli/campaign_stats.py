"""`einmal campaign stats ID [--json]`: the campaign's clicks (service/campaigns/clicks.py), a person's and a
machine's, total and unique, and per link."""

import argparse
import json
from dataclasses import asdict

from service import db
from service.campaigns import clicks
from service.cli.tables import aligned
from service.settings import Settings


async def command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        found = await clicks.of_campaign(conn, campaign_id=args.id)
    if args.json:
        print(json.dumps(asdict(found)))
        return 0
    print(f"campaign {found.campaign_id}: clicks {'tracked' if found.tracked else 'not tracked'}")
    print("\n".join(aligned(("clicks", "total", "recipients"), _rows(found))))
    if found.links:
        header = ("link", "people", "unique", "machines", "unique", "url")
        lines = [
            (link.link, link.people.total, link.people.unique, link.machines.total, link.machines.unique, link.url)
            for link in found.links
        ]
        print()
        print("\n".join(aligned(header, lines)))
    return 0


def _rows(found: clicks.Clicks) -> list[tuple[str, int, int]]:
    return [
        (what, count.total, count.unique)
        for what, count in (
            ("people", found.people),
            ("machines", found.machines),
            ("hidden link", found.hidden),
            ("all", found.all),
        )
    ]
