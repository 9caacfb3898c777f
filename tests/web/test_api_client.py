"""The OpenAPI document makes a working client: openapi-python-client generates one from the document a
real node serves, with no warning (a model it cannot read it drops, and says so), and that client runs the
HTTP API guide's flow (docs/guide/http-api.md) against the node — a list, a subscriber on it, a draft to it,
approved (its Idempotency-Key replayed), its status and the listing read back as the generated models."""

import importlib
import sys
import time
from pathlib import Path

import anyio
import asyncpg
import httpx
import pytest

from tests.support.web import http_server
from tests.web.test_api import make_key

pytestmark = pytest.mark.anyio

PACKAGE = "einmal_client"


async def generate(document: bytes, into: Path) -> str:
    """The client package generated from `document` in `into`; what the generator printed."""
    (into / "openapi.json").write_bytes(document)
    (into / "config.json").write_text('{"post_hooks": []}')  # no formatter run: ruff is not the client's concern
    done = await anyio.run_process(
        [
            str(Path(sys.executable).parent / "openapi-python-client"),
            "generate",
            "--path",
            "openapi.json",
            "--output-path",
            PACKAGE,
            "--meta",
            "none",
            "--config",
            "config.json",
            "--fail-on-warning",
        ],
        cwd=into,
        check=False,
    )
    said = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, said
    return said


@pytest.fixture
def importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """tmp_path on sys.path for the generated package, which is forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        del sys.modules[name]


async def test_a_generated_client_runs_the_readme_flow(conn: asyncpg.Connection, dsn: str, importable: Path) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    key = make_key(dsn, "acme")
    async with http_server(dsn) as base:
        async with httpx.AsyncClient() as plain:
            document = (await plain.get(f"{base}/api/v1/openapi.json")).content
        started = time.monotonic()
        said = await generate(document, importable)
        print(f"client generated in {time.monotonic() - started:.2f} s")
        assert "Warning" not in said and "removal" not in said and "Unable to" not in said, said

        client_module = importlib.import_module(PACKAGE)
        models = importlib.import_module(f"{PACKAGE}.models")
        api = {
            name: importlib.import_module(f"{PACKAGE}.api.{tag}.{name}")
            for tag, name in (
                ("lists", "put_list"),
                ("subscribers", "put_subscriber"),
                ("lists", "put_member"),
                ("campaigns", "create_campaign"),
                ("campaigns", "approve_campaign"),
                ("campaigns", "get_campaign"),
                ("campaigns", "list_campaigns"),
            )
        }
        async with client_module.AuthenticatedClient(base_url=f"{base}/api/v1", token=key) as client:
            made = await api["put_list"].asyncio_detailed("news", client=client)
            assert made.status_code == 201 and isinstance(made.parsed, models.MailingList), made.content
            fields = models.SubscriberFields(
                name="Ada", attributes=models.SubscriberFieldsAttributesType0.from_dict({"plan": "pro"})
            )
            ada = await api["put_subscriber"].asyncio_detailed("ada@example.org", client=client, body=fields)
            assert ada.status_code == 201 and isinstance(ada.parsed, models.Subscriber), ada.content
            assert ada.parsed.attributes.to_dict() == {"plan": "pro"}
            member = await api["put_member"].asyncio_detailed("news", "ADA@example.org", client=client)
            assert isinstance(member.parsed, models.Membership) and member.parsed.added, member.content

            draft = models.Draft(
                name="Spring",
                subject="Hello {{ name }}",
                from_="news@example.org",
                text="Hi {{ name }}, {{ unsubscribe_url }}",
                lists=["news"],
            )
            created = await api["create_campaign"].asyncio_detailed(
                client=client, body=draft, idempotency_key="spring-1"
            )
            assert created.status_code == 201 and isinstance(created.parsed, models.CheckedCampaign), created.content
            campaign = created.parsed
            assert (campaign.name, campaign.status, campaign.warnings) == ("Spring", "draft", [])

            approved, again = [
                await api["approve_campaign"].asyncio_detailed(campaign.id, client=client, idempotency_key="approve-1")
                for _ in range(2)
            ]
            assert isinstance(approved.parsed, models.ApprovedCampaign), approved.content
            assert (approved.parsed.status, approved.parsed.warnings) == ("approved", [])
            assert again.headers["idempotent-replayed"] == "true" and again.content == approved.content

            status = (await api["get_campaign"].asyncio_detailed(campaign.id, client=client)).parsed
            assert isinstance(status, models.CampaignProgress)
            assert (status.id, status.status, status.total) == (campaign.id, models.CampaignProgressStatus.APPROVED, 0)
            listed = (await api["list_campaigns"].asyncio_detailed(client=client)).parsed
            assert isinstance(listed, models.CampaignPage), listed
            assert [(c.id, c.status) for c in listed.campaigns] == [(campaign.id, models.CampaignStatus.APPROVED)]
    assert await conn.fetchval("SELECT status FROM einmal.campaigns") == "approved"
