"""`einmal account domain|dkim|identity|relay` and `einmal relay` (service/cli/senders.py) against a real
PostgreSQL: generated and imported DKIM keys print the record that verifies the key stored, a weak key is
refused, a relay's password is never printed, and every bad input is one line and exit 2."""

import re
import subprocess
from pathlib import Path

import asyncpg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from service.accounts import identity
from service.mail import dkim
from tests.conftest import einmal

pytestmark = pytest.mark.anyio

PASSWORD = "hunter2-relay-pass"


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout


def refused(result: subprocess.CompletedProcess, code: int = 2) -> str:
    """The one line of a refusal with exit `code`, no traceback."""
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    return result.stderr


def txt_of(line: str) -> tuple[str, str]:
    """(name, record) of a zone file line `NAME. IN TXT "…" "…"`: the strings joined, as DNS does."""
    name, _, strings = line.partition(". IN TXT ")
    return name, "".join(re.findall(r'"([^"]*)"', strings))


async def stored_record(conn: asyncpg.Connection, account_id: int, domain: str, selector: str) -> str:
    found = await identity.of_account(conn, account_id=account_id)
    [keys] = [d for d in found.domains if d.domain == domain]
    pem = dict(zip(keys.selectors, keys.keys, strict=True))[selector]
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey)
    return dkim.public_record(key).decode()


async def account(conn: asyncpg.Connection, name: str = "acme") -> int:
    return await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)


async def test_generated_keys_print_the_record_of_the_key_stored(conn: asyncpg.Connection, dsn: str) -> None:
    account_id = await account(conn)
    assert ok(einmal("account", "domain", "add", "--account", "acme", "News.Acme.Example.", dsn=dsn)) == (
        "account 'acme' may now send from news.acme.example\n"
    )
    printed = {}
    for selector, algorithm in (("s1", "rsa"), ("s2", "ed25519")):
        out = ok(
            einmal(
                "account",
                "dkim",
                "generate",
                "--account",
                "acme",
                "--domain",
                "news.acme.example",
                "--selector",
                selector,
                "--algorithm",
                algorithm,
                dsn=dsn,
            )
        )
        assert "PRIVATE" not in out and len(out.splitlines()) == 1
        name, record = txt_of(out.strip())
        assert name == f"{selector}._domainkey.news.acme.example"
        assert record == await stored_record(conn, account_id, "news.acme.example", selector)
        printed[selector] = record
    assert printed["s1"].startswith("v=DKIM1; k=rsa; p=") and printed["s2"].startswith("v=DKIM1; k=ed25519; p=")
    [domain] = (await identity.of_account(conn, account_id=account_id)).domains
    rsa_key = serialization.load_pem_private_key(domain.keys[0].encode(), password=None)
    assert isinstance(rsa_key, rsa.RSAPrivateKey) and rsa_key.key_size == 2048
    shown = ok(einmal("account", "identity", "show", "--account", "acme", dsn=dsn))
    assert all(
        txt_of(line.split(": ", 1)[1])[1] == printed[s]
        for s, line in zip(("s1", "s2"), [line for line in shown.splitlines() if "dkim" in line], strict=True)
    )
    assert "PRIVATE" not in shown and domain.keys[0].splitlines()[1] not in shown
    third = einmal(
        "account",
        "dkim",
        "generate",
        "--account",
        "acme",
        "--domain",
        "news.acme.example",
        "--selector",
        "s3",
        dsn=dsn,
    )
    assert "more than two keys" in refused(third)
    # a selector it has gets a new key in its place; removing one leaves the other
    again = ok(
        einmal(
            "account",
            "dkim",
            "generate",
            "--account",
            "acme",
            "--domain",
            "news.acme.example",
            "--selector",
            "s1",
            dsn=dsn,
        )
    )
    assert txt_of(again.strip())[1] != printed["s1"]
    ok(
        einmal(
            "account",
            "dkim",
            "remove",
            "--account",
            "acme",
            "--domain",
            "news.acme.example",
            "--selector",
            "s1",
            dsn=dsn,
        )
    )
    [domain] = (await identity.of_account(conn, account_id=account_id)).domains
    assert domain.selectors == ("s2",)
    assert await stored_record(conn, account_id, "news.acme.example", "s2") == printed["s2"]
    listed = ok(einmal("account", "domain", "list", "--account", "acme", dsn=dsn))
    assert listed.splitlines()[1].split() == ["news.acme.example", "s2"]


async def test_an_imported_key_is_checked_and_a_weak_one_refused(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    account_id = await account(conn)
    ok(einmal("account", "domain", "add", "--account", "acme", "acme.example", dsn=dsn))

    def pem(key: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey, name: str, password: bytes | None = None) -> str:
        encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
        path = tmp_path / name
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
        return str(path)

    weak = pem(rsa.generate_private_key(public_exponent=65537, key_size=1024), "weak.pem")
    (tmp_path / "junk.pem").write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    cases = {
        weak: "an RSA key of 1024 bits",
        pem(ed25519.Ed25519PrivateKey.generate(), "locked.pem", b"pw"): "the key is encrypted",
        str(tmp_path / "junk.pem"): "not a readable PEM private key",
        str(tmp_path / "nothere.pem"): "no such file",
    }
    for path, said in cases.items():
        result = einmal(
            "account",
            "dkim",
            "import",
            "--account",
            "acme",
            "--domain",
            "acme.example",
            "--selector",
            "old",
            "--key-file",
            path,
            dsn=dsn,
        )
        assert said in refused(result), result.stderr
        assert "not a key" not in result.stderr
    assert (await identity.of_account(conn, account_id=account_id)).domains[0].keys == ()
    good = pem(rsa.generate_private_key(public_exponent=65537, key_size=2048), "good.pem")
    out = ok(
        einmal(
            "account",
            "dkim",
            "import",
            "--account",
            "acme",
            "--domain",
            "acme.example",
            "--selector",
            "old",
            "--key-file",
            good,
            dsn=dsn,
        )
    )
    assert txt_of(out.strip()) == (
        "old._domainkey.acme.example",
        await stored_record(conn, account_id, "acme.example", "old"),
    )


async def test_a_relay_s_password_never_appears_in_any_output(conn: asyncpg.Connection, dsn: str) -> None:
    await account(conn)
    outputs = []

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
        result = einmal(*args, dsn=dsn, input=input)
        outputs.append(result.stdout + result.stderr)
        return result

    added = run("relay", "add", "ses", "--url", f"smtp://mailer:{PASSWORD}@127.0.0.1:2525", "--rate", "14/s")
    assert ok(added) == "relay ses: smtp://mailer:***@127.0.0.1:2525\n"
    ok(run("relay", "add", "other", "--url", "-", "--quota-day", "500", input=f"smtps://u:{PASSWORD}@127.0.0.1:4650\n"))
    refused(run("relay", "add", "ses", "--url", f"smtp://mailer:{PASSWORD}@127.0.0.1:2525"), 1)  # exists
    refused(run("relay", "add", "bad", "--url", f"smtp://mailer:{PASSWORD}@127.0.0.1:99999"))
    refused(run("relay", "add", "bad", "--url", f"http://mailer:{PASSWORD}@127.0.0.1:25"))
    refused(run("relay", "add", "bad", "--url", f"smtp://mailer:{PASSWORD}@127.0.0.1:25?weight=3"))
    ok(run("account", "relay", "attach", "--account", "acme", "ses", "--weight", "3"))
    listed = ok(run("relay", "list"))
    assert "smtp://mailer:***@127.0.0.1:2525" in listed and "acme=3" in listed and "smtps://u:***@" in listed
    shown = ok(run("account", "identity", "show", "--account", "acme"))
    assert "relay ses weight 3: smtp://mailer:***@127.0.0.1:2525 (14/s)" in shown
    assert "accounts send through relay ses" in refused(run("relay", "remove", "ses"), 1)
    ok(run("account", "relay", "detach", "--account", "acme", "ses"))
    refused(run("account", "relay", "detach", "--account", "acme", "ses"), 1)
    ok(run("relay", "remove", "ses"))
    assert "no relay named ses" in refused(run("account", "relay", "attach", "--account", "acme", "ses"), 1)
    assert [r["name"] for r in await conn.fetch("SELECT name FROM einmal.relays")] == ["other"]
    assert all(PASSWORD not in output for output in outputs), [o for o in outputs if PASSWORD in o]


async def test_the_return_path_secret_is_generated_and_never_shown(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    account_id = await account(conn)
    ok(einmal("account", "domain", "add", "--account", "acme", "acme.example", dsn=dsn))
    shown = ok(
        einmal(
            "account",
            "identity",
            "set",
            "--account",
            "acme",
            "--return-path",
            "bounces@mail.acme.example",
            "--unsubscribe-mailto",
            "unsub@acme.example",
            dsn=dsn,
        )
    )
    secret = await conn.fetchval("SELECT return_path_secret FROM einmal.accounts WHERE id = $1", account_id)
    assert len(secret) >= 16 and secret not in shown
    assert "return path: bounces@mail.acme.example; its secret set" in shown
    assert "unsubscribe mailto: unsub@acme.example" in shown
    (tmp_path / "secret").write_text("a-verp-key-given-by-the-operator\n")
    ok(
        einmal(
            "account",
            "identity",
            "set",
            "--account",
            "acme",
            "--return-path-secret-file",
            str(tmp_path / "secret"),
            dsn=dsn,
        )
    )
    found = await identity.of_account(conn, account_id=account_id)
    assert found.return_path_secret is not None
    assert found.return_path_secret.get_secret_value() == "a-verp-key-given-by-the-operator"
    cleared = ok(einmal("account", "identity", "set", "--account", "acme", "--unsubscribe-mailto", "", dsn=dsn))
    assert "unsubscribe mailto: - (EINMAL_UNSUBSCRIBE_MAILTO)" in cleared


async def test_bad_input_is_one_line_exit_2_and_unknown_names_exit_1(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    await account(conn)
    ok(einmal("account", "domain", "add", "--account", "acme", "acme.example", dsn=dsn))
    (tmp_path / "short").write_text("too-short\n")
    dkim_args = ("account", "dkim", "generate", "--account", "acme", "--domain")
    bad = {
        ("account", "domain", "add", "--account", "acme", "not a domain"): "is not a domain name",
        ("account", "domain", "add", "--account", "acme", "a@b.example"): "is not a domain name",
        ("account", "domain", "add", "--account", "acme", "localhost"): "is not a domain name",
        (*dkim_args, "acme.example", "--selector", "s_1"): "--selector 's_1'",
        (*dkim_args, "acme.example", "--selector", "s1", "--bits", "1024"): "--bits 1024",
        (*dkim_args, "acme.example", "--selector", "s1", "--algorithm", "dsa"): "invalid choice",
        ("account", "identity", "set", "--account", "acme", "--return-path", "b+x@acme.example"): "without '+'",
        ("account", "identity", "set", "--account", "acme", "--return-path", "b@elsewhere.example"): "nor a subdomain",
        ("account", "identity", "set", "--account", "acme", "--unsubscribe-mailto", "nope"): "a plain ASCII address",
        (
            "account",
            "identity",
            "set",
            "--account",
            "acme",
            "--return-path-secret-file",
            str(tmp_path / "short"),
        ): "16 printable characters",
        ("account", "identity", "set", "--account", "acme"): "nothing to set",
        ("relay", "add", "r", "--url", "smtp://127.0.0.1:25", "--rate", "fast"): "--rate 'fast'",
        ("relay", "add", "r", "--url", "smtp://127.0.0.1:25", "--quota-day", "0"): "--quota-day 0",
        ("relay", "add", "bad name", "--url", "smtp://127.0.0.1:25"): "relay: 1 to 63 letters",
        ("account", "relay", "attach", "--account", "acme", "r", "--weight", "0"): "--weight 0",
    }
    for args, said in bad.items():
        assert said in refused(einmal(*args, dsn=dsn)), args
    unknown = {
        ("account", "domain", "add", "--account", "nosuch", "acme.example"): "no account named 'nosuch'",
        ("account", "domain", "remove", "--account", "acme", "other.example"): "has no domain 'other.example'",
        (*dkim_args, "other.example", "--selector", "s1"): "has no domain 'other.example': add it first",
        ("account", "dkim", "remove", "--account", "acme", "--domain", "acme.example", "--selector", "s9"): "no key",
        ("relay", "remove", "nosuch"): "no relay named nosuch",
    }
    for args, said in unknown.items():
        assert said in refused(einmal(*args, dsn=dsn), 1), args
    assert await conn.fetchval("SELECT count(*) FROM einmal.relays") == 0
