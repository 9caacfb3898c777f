"""The API fuzzed from its own generated document (schemathesis, against a real node and PostgreSQL): every
operation with good and bad input, no server error and no answer that breaks the document. Bounded here
(API_FUZZ_EXAMPLES examples an operation, 25 by default); `make fuzz` runs more."""

import os
import sys
from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.conftest import einmal
from tests.support.dns_server import dns_server
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


@pytest.mark.slow
async def test_every_operation_holds_to_the_document_under_generated_input(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path, smtp_server
) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme'), ('other')")
    key = einmal("account", "key", "create", "--account", "acme", dsn=dsn).stdout.strip()
    examples = os.environ.get("API_FUZZ_EXAMPLES", "25")
    relay = {"smtp_host": smtp_server.host, "smtp_port": smtp_server.port}  # test messages go nowhere else
    # a body over its bound is refused before it is read, 413, which schemathesis does not count as a rejection
    (tmp_path / "schemathesis.toml").write_text(
        "[checks.negative_data_rejection]\nexpected-statuses = "
        "[400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]\n"
    )
    # GET /doctor asks DNS about the domains it is given: a loopback server, that refuses all but its one zone
    with dns_server(tmp_path, {"einmal.test": []}) as servers:
        async with http_server(dsn, **relay, dns_servers=servers) as base:
            done = await anyio.run_process(
                [
                    str(Path(sys.executable).parent / "schemathesis"),
                    "run",
                    f"{base}/api/v1/openapi.json",
                    # all checks but two: an address the document's string admits may still not be an address
                    # (email syntax is not JSON Schema's to say), and a PUT refuses it with 422, as documented; and
                    # ignored_auth, whose requests with a wrong key count as guesses of this client's network and
                    # would have it refused (429, deps.Guesses) for the rest of the run; test_api.py's every-route
                    # test sends four kinds of bad credentials to every operation (401).
                    "--checks",
                    "all",
                    "--exclude-checks",
                    "positive_data_acceptance,ignored_auth",
                    "--max-examples",
                    examples,
                    "--generation-deterministic",
                    "--workers",
                    "1",
                    "--header",
                    f"Authorization: Bearer {key}",
                    "--max-response-time",
                    "10",
                    *os.environ.get("API_FUZZ_REPORT", "").split(),
                ],
                cwd=tmp_path,
                check=False,
                env={**os.environ, "SCHEMATHESIS_HOOKS": ""},
            )
    out = done.stdout.decode()
    print(summary(out))  # `make fuzz` shows it
    assert done.returncode == 0, out[out.find("FAILURES") :][:8000]
    assert "No issues found" in out or "passed" in out, out[-2000:]
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM einmal.subscribers s JOIN einmal.accounts a "
            "ON a.id = s.account_id WHERE a.name = 'other'"
        )
        == 0
    ), "acme's key wrote to other"


def summary(out: str) -> str:
    """schemathesis's own summary: operations, test cases, failures."""
    return out[out.rfind("=" * 10, 0, max(out.rfind("SUMMARY"), 0)) :].strip() or out[-3000:]
