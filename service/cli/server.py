"""`einmal migrate`, `einmal run` and `einmal serve`: the schema, and a node."""

import argparse

from service import db
from service.db.migrate import migrate as apply_migrations
from service.settings import Settings


async def migrate(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        applied = await apply_migrations(conn)
    print(f"applied {', '.join(applied)}" if applied else "database is up to date")
    return 0


async def run(args: argparse.Namespace, settings: Settings) -> int:
    from actors import node  # the whole node: imported by the commands that run one, not by every command

    return await node.run(settings)


async def serve(args: argparse.Namespace, settings: Settings) -> int:
    from actors import node

    return await node.run(settings, node.serve_http)


def register(subparsers: argparse._SubParsersAction) -> None:
    """`run`'s --help lists the environment below its usage (service/cli/einmal.py sets that epilog)."""
    subparsers.add_parser("migrate", help="apply pending migrations (idempotent)").set_defaults(func=migrate)
    subparsers.add_parser(
        "run", help="run one node until SIGTERM", formatter_class=argparse.RawDescriptionHelpFormatter
    ).set_defaults(func=run)
    subparsers.add_parser("serve", help="serve only HTTP (EINMAL_HTTP_ADDRESS) until SIGTERM").set_defaults(func=serve)
