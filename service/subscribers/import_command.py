"""`einmal subscribers import [--from csv|listmonk|mailchimp] [--dry-run] --account A FILE`.

One transaction: the file is read (importer.py; another tool's export through service/subscribers/sources.py)
and moved in, then committed — or, with --dry-run, rolled back, so that what a dry run says is what the same
statements did to the account before they were undone: the same lines a real run prints, the first one saying
that nothing was written. Nothing an import does can lift a suppression (suppression_insert.sql only adds or
strengthens one), confirm a sign-up awaiting confirmation (list_members_insert_staged.sql leaves a membership
as it is) or put a mailbox back on a list it left (einmal.list_departures); so a later import of an older file,
in which an opted-out person was still subscribed, changes none of these.

stderr says per list what was done (`list news: 3 added (1 awaiting confirmation), 2 already on it, 1 left it in
the source: not put on it`), per suppression reason how many mailboxes were suppressed, and each refused row as
`line N: reason`; stdout has the summary line.
"""

import argparse
import sys

import anyio.to_thread

from service import audit, db
from service.errors import NotFound
from service.settings import Settings
from service.subscribers import importer, sources
from service.subscribers.importer import DEFAULT_LIST, Counts
from service.text import check_account, shown

DRY = "dry run, nothing written: "


class RolledBack(Exception):
    """Raised in a dry run's transaction to end it with a rollback."""


def per_list(counts: Counts, fallback: tuple[str, ...]) -> list[str]:
    """What the import did per list, a line each, by name, then per suppression reason."""
    said = []
    for name, done in sorted(counts.lists.items()):
        line = f"list {name}: {done.added} added"
        line += f" ({done.pending} awaiting confirmation)" if done.pending else ""
        present = done.named - done.added - done.barred
        line += f", {present} already on it" if present else ""
        line += f", {done.barred} had left it: not put back" if done.barred else ""
        if done.gone:
            line += f", {done.gone} left it in the source: not put on it"
            line += f" ({done.still} on it here all the same: kept)" if done.still else ""
        if name == DEFAULT_LIST and not fallback:
            line += " (new subscribers of rows naming no list; --list chooses)"
        said.append(line)
    if counts.kept:
        said.append(f"{counts.kept} already present, naming no list: their lists unchanged")
    for reason, (added, given) in sorted(counts.reasons.items()):
        line = f"suppressions {reason}: {added} added"
        said.append(line + (f", {given - added} already suppressed: kept as they were" if given > added else ""))
    return said


def summary(counts: Counts) -> str:
    notes = [f"attributes changed for {counts.changed}"] * bool(counts.changed) + [
        f"{counts.respelled} under another spelling"
    ] * bool(counts.respelled)
    changed = f" ({'; '.join(notes)})" if notes else ""
    suppressed = f", suppressed {counts.suppressed}" if counts.suppressed else ""
    unlisted = f", {counts.unlisted} awaiting confirmation, put on no list" if counts.unlisted else ""
    optouts = f", {counts.optouts} opted out: no subscriber made" if counts.optouts else ""
    return (
        f"imported {counts.imported}, already present {counts.good - counts.imported}{changed}, "
        f"rejected {counts.rejected}{suppressed}{unlisted}{optouts}"
    )


async def command(args: argparse.Namespace, settings: Settings) -> int:
    account = check_account(args.account)
    fallback = importer.fallback_lists(getattr(args, "lists", []))
    form = getattr(args, "source", "csv")
    reading = sources.reading(form, fallback, getattr(args, "subscription_status", None))
    dry_run = getattr(args, "dry_run", False)
    file = await anyio.to_thread.run_sync(importer.open_csv, args.file)
    with file:
        async with db.connection(db.url(settings)) as conn:
            try:
                async with conn.transaction():
                    created = False
                    if getattr(args, "create_account", False):  # a typo would make an account silently: say so
                        ensured = await conn.fetchrow(*db.sql("account_ensure", name=account))
                        assert ensured is not None  # the account's row, made or found
                        account_id, created = ensured
                    else:
                        account_id = await conn.fetchval(*db.sql("account_find", account=account))
                        if account_id is None:
                            raise NotFound(f"no account named {shown(account)}; --create-account creates it")
                    counts = await importer.import_file(
                        conn,
                        account_id,
                        file,
                        args.file,
                        importer.print_rejected,
                        fallback,
                        reading,
                        sources.source(form),
                    )
                    if dry_run:
                        raise RolledBack  # the transaction's end undoes everything
                    # its line of the audit log, in its transaction: what it did, as its last line says it
                    await audit.record(
                        conn, actor="cli", account_id=account_id, action="subscriber.import", subject=summary(counts)
                    )
            except RolledBack:
                pass
    if dry_run:
        print(DRY + "what the import would do follows", file=sys.stderr)
    if created:
        print(f"einmal: {'would create' if dry_run else 'created'} account {shown(account)}", file=sys.stderr)
    for line in per_list(counts, fallback):
        print(line, file=sys.stderr)
    print((DRY if dry_run else "") + summary(counts))
    return 0
