"""The bodies of the commands: each opens what it needs and delegates."""

import argparse
import importlib

from service import db
from service.migrate import migrate as apply_migrations
from service.settings import Settings


def lazy(module: str, name: str):
    """A command whose module (its full dotted name) is imported only when it runs."""

    async def command(args: argparse.Namespace, settings: Settings) -> int:
        return await getattr(importlib.import_module(module), name)(args, settings)

    return command


async def migrate(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        applied = await apply_migrations(conn)
    print(f"applied {', '.join(applied)}" if applied else "database is up to date")
    return 0


async def run(args: argparse.Namespace, settings: Settings) -> int:
    from service import node

    return await node.run(settings)


async def serve(args: argparse.Namespace, settings: Settings) -> int:
    from service import node

    return await node.run(settings, node.serve_http)


async def demo(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli import demo

    return await demo.run(args, settings)


async def subscribers_import(args: argparse.Namespace, settings: Settings) -> int:
    from service.subscribers import importer

    return await importer.command(args, settings)


async def campaign_create(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli import campaigns

    return await campaigns.create_command(args, settings)


async def campaign_transition(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli import campaigns

    return await campaigns.transition_command(args, settings)


async def campaign_status(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli import campaigns

    return await campaigns.status_command(args, settings)


async def campaign_list(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli import campaign_view

    return await campaign_view.list_command(args, settings)


async def campaign_preview(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli import campaign_view

    return await campaign_view.preview_command(args, settings)


async def campaign_test(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli import campaign_view

    return await campaign_view.test_command(args, settings)


async def suppress(args: argparse.Namespace, settings: Settings) -> int:
    from service.subscribers import suppressions

    return await suppressions.suppress_command(args, settings)


async def reconcile(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli import campaigns

    return await campaigns.reconcile_command(args, settings)
