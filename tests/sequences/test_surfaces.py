"""Sequences made and run from the API (/api/v1/sequences…) and the command line (`einmal sequence …`), both
calling service/sequences/: each route's answer, its checks (a template that does not compile, a window or a
zone that is none, a name or a position used) answered in one line, another account's sequence not found."""

import anyio
import asyncpg
import httpx
import pytest

from tests.conftest import cells, einmal
from tests.sequences.helpers import join
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


async def keyed(conn: asyncpg.Connection, dsn: str) -> tuple[int, int, dict[str, str], dict[str, str]]:
    """(acme's id, its list news's id, a write key of acme's, one of other's) as headers."""
    acme = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('other')")
    news = await conn.fetchval("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news') RETURNING id", acme)
    keys = []
    for account in ("acme", "other"):
        made = await anyio.to_thread.run_sync(
            lambda a=account: einmal("account", "key", "create", "--account", a, dsn=dsn)
        )
        assert made.returncode == 0, made.stderr
        keys.append({"Authorization": f"Bearer {made.stdout.strip()}"})
    return acme, news, keys[0], keys[1]


async def test_the_api_creates_runs_and_shows_a_sequence(conn: asyncpg.Connection, dsn: str) -> None:
    acme, news, key, other = await keyed(conn, dsn)
    await join(conn, acme, news, ["before@example.com"])
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=key) as client,
    ):
        made = await client.post("/sequences", json={"name": "welcome", "list": "news", "existing": True})
        assert made.status_code == 201, made.text
        sequence = made.json()["id"]
        assert made.json()["members"] == 1 and made.json()["status"] == "running"  # existing: the one on the list
        again = await client.post("/sequences", json={"name": "welcome", "list": "news"})
        assert again.status_code == 409 and "welcome" in again.json()["error"]
        assert (await client.post("/sequences", json={"name": "x", "list": "nosuch"})).status_code == 422
        step = {"subject": "Hi {{ name }}", "from": "news@example.com", "text": "Welcome!", "delay_seconds": 0}
        first = await client.post(f"/sequences/{sequence}/steps", json=step)
        assert first.status_code == 201 and first.json()["position"] == 1, first.text
        second = await client.post(
            f"/sequences/{sequence}/steps",
            json={**step, "delay_seconds": 86400, "window": {"start": 9, "end": 17, "zone": "Europe/Berlin"}},
        )
        assert second.json()["position"] == 2
        taken = await client.post(f"/sequences/{sequence}/steps", json={**step, "position": 1})
        assert taken.status_code == 409 and "never reused" in taken.json()["error"]
        for bad, said in (
            ({**step, "text": "{% for %}"}, "text body"),
            ({**step, "window": {"start": 9, "end": 9, "zone": "UTC"}}, "window"),
            ({**step, "window": {"start": 9, "end": 17, "zone": "Mars/Olympus"}}, "time zone"),
            ({**step, "delay_seconds": -1}, "delay_seconds"),
        ):
            answer = await client.post(f"/sequences/{sequence}/steps", json=bad)
            assert answer.status_code == 422 and said in answer.json()["error"], answer.text
        nulled = await client.patch(f"/sequences/{sequence}/steps/2", json={"subject": None})
        assert nulled.status_code == 422 and nulled.json() == {"error": "subject: may not be null"}
        changed = await client.patch(f"/sequences/{sequence}/steps/2", json={"subject": "Day two", "window": None})
        assert changed.status_code == 200, changed.text
        shown = (await client.get(f"/sequences/{sequence}")).json()
        assert [(s["position"], s["subject"], s["window"], s["status"]) for s in shown["steps"]] == [
            (1, "Hi {{ name }}", None, "sending"),
            (2, "Day two", None, "sending"),
        ]
        assert shown["steps"][0]["waiting"] == 1 and shown["sequence"]["members"] == 1
        assert set(shown["steps"][0]["counts"]) >= {"queued", "sent", "failed", "suppressed", "in_doubt"}
        paused = await client.post(f"/sequences/{sequence}/pause")
        assert paused.status_code == 200 and paused.json()["sequence"]["status"] == "paused"
        assert {s["status"] for s in paused.json()["steps"]} == {"paused"}
        assert (await client.post(f"/sequences/{sequence}/pause")).status_code == 409
        resumed = await client.post(f"/sequences/{sequence}/resume")
        assert {s["status"] for s in resumed.json()["steps"]} == {"sending"}
        deleted = await client.delete(f"/sequences/{sequence}/steps/2")
        assert deleted.status_code == 200
        assert (await client.delete(f"/sequences/{sequence}/steps/2")).status_code == 404
        listed = (await client.get("/sequences")).json()["sequences"]
        assert [(s["name"], s["steps"], s["members"]) for s in listed] == [("welcome", 1, 1)]
        # another account's key: not found, nothing listed
        assert (await client.get(f"/sequences/{sequence}", headers=other)).status_code == 404
        assert (await client.post(f"/sequences/{sequence}/pause", headers=other)).status_code == 404
        assert (await client.get("/sequences", headers=other)).json() == {"sequences": []}
    assert await conn.fetchval("SELECT status FROM einmal.sequences") == "running"


async def test_the_command_line_creates_runs_and_shows_a_sequence(conn: asyncpg.Connection, dsn: str, tmp_path) -> None:
    acme = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    news = await conn.fetchval("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news') RETURNING id", acme)

    def run(*args: str):
        return einmal(*args, dsn=dsn)

    made = await anyio.to_thread.run_sync(
        lambda: run("sequence", "create", "welcome", "--account", "acme", "--list", "news")
    )
    assert made.returncode == 0, made.stderr
    sequence = made.stdout.strip()
    body = tmp_path / "day3.txt"
    body.write_text("Three days in, {{ name }}.", encoding="utf-8")
    added = await anyio.to_thread.run_sync(
        lambda: run(
            "sequence",
            "step",
            "add",
            sequence,
            "--account",
            "acme",
            "--subject",
            "Welcome",
            "--from",
            "news@example.com",
            "--text",
            "Hello {{ name }}",
        )
    )
    assert added.returncode == 0 and added.stdout.startswith("step 1 of sequence"), added.stderr
    later = await anyio.to_thread.run_sync(
        lambda: run(
            "sequence",
            "step",
            "add",
            sequence,
            "--account",
            "acme",
            "--subject",
            "Day three",
            "--from",
            "news@example.com",
            "--text-file",
            str(body),
            "--delay",
            "3d",
            "--window",
            "9-17",
            "--zone",
            "Europe/Berlin",
        )
    )
    assert later.returncode == 0, later.stderr
    assert await conn.fetchval("SELECT step_delay_seconds FROM einmal.campaigns WHERE step_position = 2") == 3 * 86400
    await join(conn, acme, news, ["a@example.com", "b@example.com"])
    status = await anyio.to_thread.run_sync(lambda: run("sequence", "status", sequence, "--account", "acme"))
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert "2 members" in lines[0]
    assert cells(lines[1])[:6] == ["step", "campaign", "status", "delay s", "window", "waiting"]
    assert cells(lines[2])[2:6] == ["sending", "0", "-", "2"]
    assert cells(lines[3])[2:6] == ["sending", "259200", "9-17 Europe/Berlin", "0"]
    for args, code, said in (
        (
            (
                "sequence",
                "step",
                "add",
                sequence,
                "--account",
                "acme",
                "--subject",
                "x",
                "--from",
                "news@example.com",
                "--text",
                "y",
                "--delay",
                "soon",
            ),
            1,
            "--delay 'soon'",
        ),
        (("sequence", "step", "change", sequence, "9", "--account", "acme", "--subject", "x"), 1, "no such step"),
        (("sequence", "status", "999", "--account", "acme"), 1, "no such sequence"),
        (("sequence", "pause", sequence, "--account", "nosuch"), 1, "no account named 'nosuch'"),
        (("sequence", "create", "welcome", "--account", "acme", "--list", "news"), 1, "already"),
    ):
        done = await anyio.to_thread.run_sync(lambda a=args: run(*a))
        assert done.returncode == code and said in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    step_one = await conn.fetchval("SELECT id FROM einmal.campaigns WHERE step_position = 1")
    a_member = await conn.fetchval("SELECT min(subscriber_id) FROM einmal.sequence_members")
    await conn.execute(
        "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status, "
        "claimed_by) VALUES ($1, $2, $3, 'a@example.com', 'a@example.com', "
        "'campaign:' || $1::bigint || ':' || $3::bigint, "
        "'in_doubt', 'gone-node')",
        step_one,
        acme,
        a_member,
    )
    doubted = await anyio.to_thread.run_sync(lambda: run("sequence", "status", sequence, "--account", "acme"))
    assert doubted.stdout.splitlines()[-1] == (
        f"step 1: 1 message in doubt, its member waits: decide with `einmal reconcile {step_one}`"
    )
    for verb in ("pause", "resume"):
        done = await anyio.to_thread.run_sync(lambda v=verb: run("sequence", v, sequence, "--account", "acme"))
        assert done.returncode == 0 and done.stdout.strip().endswith(("paused", "resumed")), done.stderr
    changed = await anyio.to_thread.run_sync(
        lambda: run(
            "sequence", "step", "change", sequence, "2", "--account", "acme", "--window", "any", "--delay", "1h"
        )
    )
    assert changed.returncode == 0, changed.stderr
    row = await conn.fetchrow(
        "SELECT step_delay_seconds, step_window_zone FROM einmal.campaigns WHERE step_position = 2"
    )
    assert tuple(row) == (3600, None)
    gone = await anyio.to_thread.run_sync(lambda: run("sequence", "step", "delete", sequence, "2", "--account", "acme"))
    assert gone.returncode == 0, gone.stderr
    listed = await anyio.to_thread.run_sync(lambda: run("sequence", "list", "--account", "acme"))
    assert [cells(line)[1:] for line in listed.stdout.splitlines()[1:]] == [["welcome", "news", "running", "1", "2"]]


NO_LINK = (
    "warning: neither body shows {{ unsubscribe_url }}: the List-Unsubscribe header works, but a visible link is "
    "what people look for before they press 'spam'"
)


async def test_a_step_whose_bodies_show_no_unsubscribe_link_is_made_with_the_campaigns_warning(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """As a campaign is (service/campaigns/preview.py, the trial): added or changed all the same, the answer's
    `warnings` (the command's stderr) say that neither body shows {{ unsubscribe_url }}, after any change that
    leaves it so; a link in either body, none."""
    _, _, key, _ = await keyed(conn, dsn)
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=key) as client,
    ):
        sequence = (await client.post("/sequences", json={"name": "welcome", "list": "news"})).json()["id"]
        url = f"/sequences/{sequence}/steps"
        step = {"subject": "Hi {{ name }}", "from": "news@example.com", "text": "Welcome!"}
        bare = await client.post(url, json=step)
        assert bare.status_code == 201, bare.text
        assert bare.json() == {"sequence_id": sequence, "position": 1, "campaign_id": bare.json()["campaign_id"]} | {
            "warnings": [NO_LINK]
        }
        linked = await client.post(url, json={**step, "text": "Welcome!\n{{ unsubscribe_url }}\n"})
        in_html = await client.post(url, json={**step, "html": '<a href="{{ unsubscribe_url }}">leave</a>'})
        assert (linked.status_code, linked.json()["warnings"]) == (201, [])
        assert (in_html.status_code, in_html.json()["warnings"]) == (201, [])
        changes = {
            (1, "subject"): ({"subject": "Hello"}, [NO_LINK]),
            (1, "text"): ({"text": "Hi\n{{ unsubscribe_url }}"}, []),
            (2, "text"): ({"text": "no link now"}, [NO_LINK]),
            (3, "html"): ({"html": None}, [NO_LINK]),
        }
        for (position, what), (body, warnings) in changes.items():
            changed = await client.patch(f"{url}/{position}", json=body)
            assert changed.status_code == 200 and changed.json()["warnings"] == warnings, (position, what, changed.text)
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns WHERE kind = 'step'") == 3

    def run(*args: str):
        return einmal("sequence", "step", *args, "--account", "acme", dsn=dsn)

    added = await anyio.to_thread.run_sync(
        lambda: run("add", str(sequence), "--subject", "S", "--from", "news@example.com", "--text", "Bye")
    )
    assert added.returncode == 0 and added.stdout.startswith("step 4 of sequence"), added.stderr
    assert added.stderr == f"einmal: {NO_LINK}\n"
    fixed = await anyio.to_thread.run_sync(lambda: run("change", str(sequence), "4", "--text", "{{ unsubscribe_url }}"))
    assert fixed.returncode == 0 and fixed.stderr == "", fixed.stderr
    bare = await anyio.to_thread.run_sync(lambda: run("change", str(sequence), "4", "--text", "Bye again"))
    assert bare.returncode == 0 and bare.stderr == f"einmal: {NO_LINK}\n", bare.stderr
