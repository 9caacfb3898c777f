"""`einmal campaign stats ID [--json]`, `einmal sequence stats NAME` and `einmal message template stats NAME`: their
engagement (service/engagement/counts.py) — delivered, bounced, complained, unsubscribed — and, where links are
tracked, the clicks, a person's and a machine's, total and unique, and per link; the opens alike
(service/campaigns/opens.py)."""

import argparse
import json
from dataclasses import asdict

from service import db
from service.campaigns.clicks import Clicks, Tally
from service.campaigns.opens import Opens
from service.cli.tables import aligned
from service.engagement import counts
from service.settings import Settings

FIGURES = ("delivered", "bounced", "complained", "unsubscribed")


async def command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        found = await counts.of_campaign(conn, campaign_id=args.id)
    if args.json:
        print(json.dumps(asdict(found)))
        return 0
    print(f"campaign {found.campaign_id}: {figures(found)}")
    print_clicks(found.clicks)
    print_opens(found.opens)
    return 0


def figures(found: counts.Engagement) -> str:
    return ", ".join(f"{name} {getattr(found, name)}" for name in FIGURES)


def print_clicks(found: Clicks | None) -> None:
    if found is None:
        return
    print(f"clicks {'tracked' if found.tracked else 'not tracked'}")
    print("\n".join(aligned(("clicks", "total", "recipients"), _rows(found))))
    if found.links:
        header = ("link", "people", "unique", "machines", "unique", "url")
        lines = [
            (link.link, link.people.total, link.people.unique, link.machines.total, link.machines.unique, link.url)
            for link in found.links
        ]
        print()
        print("\n".join(aligned(header, lines)))


def print_opens(found: Opens | None) -> None:
    if found is None:
        return
    print()
    print(f"opens {'tracked' if found.tracked else 'not tracked'}")
    print("\n".join(aligned(("opens", "total", "recipients"), _rows(found))))


def _rows(found: Tally) -> list[tuple[str, int, int]]:
    hidden = (("hidden link", found.hidden),) if isinstance(found, Clicks) else ()
    return [
        (what, count.total, count.unique)
        for what, count in (("people", found.people), ("machines", found.machines), *hidden, ("all", found.all))
    ]
