"""Every guide's blocks run in the suite, as they are written there: each ```sh, bash, shell, console or python
block of docs/guide/ is taken by a test through tests/support/doc_examples.example (a check below fails when a
block has none), and here are the tests of the blocks no other test runs. A ```console block's commands are
run and the lines it shows them print are looked for in what they printed."""

import ast
import json
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import asyncpg
import pytest

from service.users import users
from tests.cli.test_import_sources import CLEANED, LISTMONK, SUBSCRIBED, UNSUBSCRIBED
from tests.conftest import ROOT, UNSUBSCRIBE
from tests.support import doc_examples
from tests.support.optin import SECRET
from tests.support.web import http_server

# blocks no test of the suite runs, and why: `make run` and `make test` are the suite's own ways in
NOT_RUN = {
    ("guide/tutorial.md", "sh", "## Two commands"): "make run and make test (tests/cli/test_demo.py runs the demo)"
}

NO_NODE = "http://127.0.0.1:9"  # blocks that use only the command line: an API_URL nothing answers


def _exports(**variables: str) -> str:
    """The unsubscribe link's settings and `variables`, exported as a reader's shell has them."""
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in {**UNSUBSCRIBE, **variables}.items())


async def _acme(conn: asyncpg.Connection, *lists: str) -> None:
    """Account acme, with `lists`: what a reader of the page has made before."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.executemany("INSERT INTO einmal.lists (account_id, name) VALUES ($1, $2)", [(account, n) for n in lists])


def test_every_guide_block_is_run_by_a_test() -> None:
    sources = {p: p.read_text() for p in (ROOT / "tests").rglob("*.py")}
    missing = []
    for page in sorted((ROOT / "docs" / "guide").glob("*.md")):
        name = f"guide/{page.name}"
        shown = doc_examples.blocks(name)
        for fence, heading in shown:
            if (name, fence, heading) in NOT_RUN:
                continue
            alone = sum(f == fence for f, _ in shown) == 1
            call = re.compile(rf'example\(\s*"{re.escape(name)}",\s*"{fence}"')
            if not any(call.search(text) and (alone or heading in text) for text in sources.values()):
                missing.append(f"{name} ```{fence} under {heading!r}")
    assert missing == [], "blocks no test runs: " + "; ".join(missing)


def test_the_check_finds_every_fence_readers_run() -> None:
    assert doc_examples.blocks("guide/importing.md") == [
        ("console", "# Moving in from listmonk or Mailchimp"),
        ("console", "## listmonk"),
        ("console", "## Mailchimp"),
    ]
    assert ("python", "## The audit log") in doc_examples.blocks("guide/console.md")
    assert ("sh", "## Relays") in doc_examples.blocks("guide/accounts-identity.md")
    assert ("text", "## From domains") not in doc_examples.blocks("guide/accounts-identity.md")  # what is printed


@pytest.mark.anyio
async def test_the_messages_guides_command_line_block_runs_as_written(conn: asyncpg.Connection, dsn: str) -> None:
    await _acme(conn)
    block = doc_examples.example("guide/messages.md", "shell", "## Templates and messages")
    code, out, err = await doc_examples.run(block, dsn, NO_NODE)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "added template receipt" and lines[-1] == "removed template receipt", out
    assert lines[3] == "4503599627370496"  # the id a new installation's first message has, shown next by the page
    assert "message 4503599627370496: queued" in lines and "to: ada@example.org" in lines, out


@pytest.mark.anyio
async def test_the_sequences_guides_other_commands_run_after_its_first_block(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await _acme(conn, "news")
    first = doc_examples.example("guide/sequences.md", "bash")
    others = doc_examples.example("guide/sequences.md", "shell", "# Sequences")
    async with http_server(dsn) as base:
        code, out, err = await doc_examples.run(_exports() + first + others, dsn, base)
    assert code == 0, err
    lines = out.splitlines()
    assert "1   welcome  news  running  2      0" in lines, out
    assert ["sequence 1 paused", "sequence 1 resumed", "step 2 of sequence 1 changed"] == lines[-6:-3], out
    assert lines[-2] == "step 2 of sequence 1 deleted; its messages not yet sent are cancelled", out
    assert lines[-1] == "2"  # onboarding, with --existing: the sequence's id
    steps = await conn.fetch(
        "SELECT step_position, subject, step_window_from, status FROM einmal.campaigns WHERE kind = 'step' "
        "ORDER BY step_position"
    )
    # step 2 took the new subject, lost its window, then was deleted: cancelled
    assert [tuple(r) for r in steps] == [
        (1, "Welcome, {{ name }}", None, "sending"),
        (2, "Day three", None, "cancelled"),
    ]


@pytest.mark.anyio
async def test_the_double_opt_in_guides_commands_run_as_written(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    acme = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    beta = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('beta') RETURNING id")
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news'), ($2, 'weekly')", acme, beta)
    (tmp_path / "confirm.txt").write_text("Please confirm: {{ confirm_url }}\n")
    setup = (
        _exports(
            EINMAL_CONFIRM_URL="https://mail.example.org/confirm",
            EINMAL_OPTIN_FROM="Acme News <news@example.org>",
            EINMAL_UNSUBSCRIBE_SECRET=SECRET,
        )
        + "einmal account domain add --account beta mail.beta.example\n"
    )
    block = doc_examples.example("guide/double-opt-in.md", "shell")
    code, out, err = await doc_examples.run(setup + block, dsn, NO_NODE, cwd=tmp_path)
    assert code == 0, err
    forms = out.splitlines()[3:7]
    assert all(f.startswith("https://mail.example.org/forms/") for f in forms) and len(set(forms)) == 2, out
    assert "list 'news': title 'Weekly news'" in out and err.rstrip().endswith("list 'news': sign-ups closed"), err
    assert "from https://shop.example.org; confirmations from 'Acme News <news@example.org>'" in err, err
    assert "confirmations from 'Beta <hello@mail.beta.example>', subject 'Confirm: {{ campaign.name }}'" in err, err


@pytest.mark.anyio
async def test_the_segments_guides_commands_run_as_written(conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    await _acme(conn, "churned")
    (tmp_path / "people.csv").write_text(
        "email,name,plan\nann@example.org,Ann,pro\nbob@example.org,Bob,free\ncy@example.org,Cy,pro\n"
    )
    (tmp_path / "churned.csv").write_text("email,list\ncy@example.org,churned\n")
    (tmp_path / "spring.txt").write_text("Spring is here. No more mail: {{ unsubscribe_url }}\n")
    setup = _exports() + (
        "einmal subscribers import --account acme --list default people.csv\n"
        "einmal subscribers import --account acme churned.csv\n"
    )
    block = doc_examples.example("guide/segments.md", "shell")
    code, out, err = await doc_examples.run(setup + block, dsn, NO_NODE, cwd=tmp_path)
    assert code == 0, err
    assert out.splitlines()[2:4] == ["pro-new", "1 subscribers, 0 of them suppressed"], out  # Cy churned
    assert "ann@example.org  Ann" in out and "cy@example.org" not in out and "bob@" not in out, out
    campaign = await conn.fetchrow("SELECT id, segment FROM einmal.campaigns")
    assert out.splitlines()[-1] == str(campaign["id"]) and campaign["segment"] == "pro-new", out


@pytest.mark.anyio
async def test_the_click_tracking_guides_blocks_run_as_written(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    await _acme(conn, "news")
    (tmp_path / "spring.html").write_text(
        '<p>Spring is here: <a href="https://example.org/spring">read on</a>.</p>'
        '<p><a href="{{ unsubscribe_url }}">No more mail</a></p>'
    )
    (tmp_path / "spring.txt").write_text(
        "Spring is here: https://example.org/spring\nNo more mail: {{ unsubscribe_url }}\n"
    )
    turning = doc_examples.example("guide/click-tracking.md", "sh", "## Turning it on")
    seeing = doc_examples.example("guide/click-tracking.md", "sh", "## Seeing them")
    code, out, err = await doc_examples.run(_exports() + turning + seeing, dsn, NO_NODE, cwd=tmp_path)
    assert code == 0, err
    lines = out.splitlines()
    campaign = await conn.fetchval("SELECT id FROM einmal.campaigns WHERE name = 'Spring news'")
    assert lines[0] == f"campaign {campaign}: delivered 0, bounced 0, complained 0, unsubscribed 0", out
    assert lines[1] == "clicks tracked" and "people       0      0" in lines, out
    shown = json.loads(lines[-1])
    assert shown["campaign_id"] == campaign and shown["clicks"]["tracked"] is True, out
    assert shown["opens"]["tracked"] is False, out


@pytest.mark.anyio
async def test_the_click_tracking_guides_opens_block_runs_as_written(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    await _acme(conn, "news")
    (tmp_path / "spring.html").write_text('<p>Spring is here.</p><p><a href="{{ unsubscribe_url }}">No more</a></p>')
    (tmp_path / "spring.txt").write_text("Spring is here.\nNo more mail: {{ unsubscribe_url }}\n")
    block = doc_examples.example("guide/click-tracking.md", "sh", "## Opens {#opens}")
    setup = _exports(EINMAL_CLICK_URL="https://mail.example.org/c")
    code, out, err = await doc_examples.run(setup + block, dsn, NO_NODE, cwd=tmp_path)
    assert code == 0, err
    campaign = await conn.fetchrow("SELECT id, track_opens FROM einmal.campaigns WHERE name = 'Spring opens'")
    assert campaign["track_opens"] is True
    lines = out.splitlines()
    assert lines[0].startswith(f"campaign {campaign['id']}: delivered 0") and "opens tracked" in lines, out
    assert lines[lines.index("opens tracked") + 1].split() == ["opens", "total", "recipients"], out


@pytest.mark.anyio
async def test_the_console_guides_user_commands_run_as_written(conn: asyncpg.Connection, dsn: str) -> None:
    await _acme(conn)
    block = doc_examples.example("guide/console.md", "sh", "## Users and roles")
    typed = "a-password-typed-at-the-prompt\n"  # the first command's prompt, as a reader answers it
    setup = _exports(PASSWORD="a-new-password-from-stdin")
    code, out, err = await doc_examples.run(setup + block, dsn, NO_NODE, input=typed)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "added console user ops@example.org (operator)" and len(lines[1]) >= 20, out  # generated
    assert "changed the password of console user ann@acme.example; its sessions ended" in lines, out
    assert lines[-1] == "removed console user ann@acme.example; its sessions ended", out
    assert await users.sign_in(conn, name="ops@example.org", password=typed.strip()) is not None
    assert await conn.fetchval("SELECT count(*) FROM einmal.console_users") == 1  # ann removed


@pytest.mark.anyio
async def test_the_console_guides_audit_example_records_a_line(conn: asyncpg.Connection) -> None:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    code = compile(
        doc_examples.example("guide/console.md", "python"), "console.md", "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    key = SimpleNamespace(id=7, account_id=account)
    await eval(code, {"conn": conn, "key": key, "campaign_id": 12})
    line = await conn.fetchrow("SELECT actor, account_id, action, subject FROM einmal.audit_log")
    assert tuple(line) == ("api:key 7", account, "campaign.approve", "campaign 12")


@pytest.mark.anyio
async def test_the_importing_guides_sessions_run_and_print_what_they_show(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    await _acme(conn, "news")
    files = {
        "dana.csv": "email,name,list,company\ndana@example.org,Dana Ng,news,Acme\n",  # of the export, on it already
        "subscribed_members_export_1a2b3c.csv": SUBSCRIBED,
        "unsubscribed_members_export_1a2b3c.csv": UNSUBSCRIBED,
        "cleaned_members_export_1a2b3c.csv": CLEANED,
        **{f"news-{status}.csv": LISTMONK for status in ("confirmed", "unconfirmed", "unsubscribed")},
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code, _, err = await doc_examples.run(
        "einmal subscribers import --account acme dana.csv", dsn, NO_NODE, cwd=tmp_path
    )
    assert code == 0, err
    for heading in ("# Moving in from listmonk or Mailchimp", "## listmonk", "## Mailchimp"):
        commands, shown = doc_examples.session(doc_examples.example("guide/importing.md", "console", heading))
        code, out, err = await doc_examples.run(commands, dsn, NO_NODE, cwd=tmp_path)
        assert code == 0, (heading, err)
        assert doc_examples.unprinted(shown, out + err) == [], (heading, out, err)
    suppressed = dict(await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions"))
    assert suppressed == {
        "bob@example.org": "blocklisted",  # listmonk's blocklist
        "gus@example.org": "unsubscribe",  # Mailchimp's unsubscribed file
        "hal@example.org": "complaint",  # its "Abuse complaint"
        "ivy@example.org": "bounce",  # its cleaned file
    }


@pytest.mark.anyio
async def test_the_accounts_guides_commands_run_as_written(conn: asyncpg.Connection, dsn: str) -> None:
    await _acme(conn)
    domains = doc_examples.example("guide/accounts-identity.md", "sh", "## From domains")
    # its last command removes the domain the next blocks use: given again, as a reader would
    again = "einmal account domain add --account acme news.acme.example\n"
    keys, shown = doc_examples.session(doc_examples.example("guide/accounts-identity.md", "console", "## DKIM keys"))
    relays = doc_examples.example("guide/accounts-identity.md", "sh", "## Relays")
    rest = relays + doc_examples.example("guide/accounts-identity.md", "sh", "## Return path and unsubscribe mailto")
    code, out, err = await doc_examples.run(domains + again + keys + rest, dsn, NO_NODE)
    assert code == 0, err
    assert doc_examples.unprinted(shown, out) == [], out  # the DKIM records, their keys cut short
    lines = out.splitlines()
    assert lines[0] == "account 'acme' may now send from news.acme.example" and lines[2] == "news.acme.example  -", out
    assert "relay ses-eu: smtp://AKIA…:***@email-smtp.eu-west-1.amazonaws.com:587?tls=starttls" in lines, out
    assert "PASSWORD" not in out + err  # the relay's password never printed
    assert lines[-1] == "unsubscribe mailto: unsubscribe@news.acme.example", out
    identity = await conn.fetchrow("SELECT return_path FROM einmal.accounts")
    assert identity["return_path"] == "bounces@mail.news.acme.example"
