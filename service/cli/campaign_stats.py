"""`einmal campaign stats ID [--json]`: the campaign's clicks (service/campaigns/clicks.py), a person's and a
machine's, total and unique, and per link; its opens (service/campaigns/opens.py) alike."""

import argparse
import json
from dataclasses import asdict

from service import db
from service.campaigns import clicks, opens
from service.cli.tables import aligned
from service.settings import Settings


async def command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        found = await clicks.of_campaign(conn, campaign_id=args.id)
        opened = await opens.of_campaign(conn, campaign_id=args.id)
    if args.json:
        print(json.dumps({**asdict(found), "opens": asdict(opened)}))
        return 0
    print(f"campaign {found.campaign_id}: clicks {'tracked' if found.tracked else 'not tracked'}")
    print("\n".join(aligned(("clicks", "total", "recipients"), _rows(found))))
    print()
    print(f"opens {'tracked' if opened.tracked else 'not tracked'}")
    print("\n".join(aligned(("opens", "total", "recipients"), _rows(opened))))
    if found.links:
        header = ("link", "people", "unique", "machines", "unique", "url")
        lines = [
            (link.link, link.people.total, link.people.unique, link.machines.total, link.machines.unique, link.url)
            for link in found.links
        ]
        print()
        print("\n".join(aligned(header, lines)))
    return 0


def _rows(found: clicks.Tally) -> list[tuple[str, int, int]]:
    hidden = (("hidden link", found.hidden),) if isinstance(found, clicks.Clicks) else ()
    return [
        (what, count.total, count.unique)
        for what, count in (("people", found.people), ("machines", found.machines), *hidden, ("all", found.all))
    ]
