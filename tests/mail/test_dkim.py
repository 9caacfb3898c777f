"""DKIM signatures made by einmal, checked by dkimpy as the independent verifier (its DNS answered
by a stub that knows only our selector)."""

import email.parser
import email.policy
import os
import subprocess
import sys

import dkim as dkimpy
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from service.mail import dkim
from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate
from service.relays import Relaying
from service.settings import Settings
from tests.conftest import ROOT
from tests.mail.test_render import campaign, make_settings, parse

DOMAIN, SELECTOR = "acme.example", "mail2026"
NAMES = ["Jane Doe", "Jörg  Müller ", "  spaced   out  ", "山田 太郎", "", "Ann\tTab", "x" * 90, 'O\'Brien "Bob"']


def pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture(scope="module", params=["ed25519", "rsa"])
def key(request):
    if request.param == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def key_file(key, tmp_path) -> str:
    path = tmp_path / "dkim.pem"
    path.write_bytes(pem(key))
    return str(path)


def dns_stub(key):
    record = dkim.public_record(key)

    def dnsfunc(name, timeout=5):
        name = name.decode() if isinstance(name, bytes) else name
        return record if name.rstrip(".") == f"{SELECTOR}._domainkey.{DOMAIN}" else None

    return dnsfunc


def signed_settings(key_file: str, **overrides) -> Settings:
    base = make_settings().model_dump()
    return Settings(
        **base | {"dkim_domain": DOMAIN, "dkim_selector": SELECTOR, "dkim_private_key_file": key_file} | overrides
    )


def verified(message: bytes, key) -> bool:
    return dkimpy.verify(message, dnsfunc=dns_stub(key), minkey=1024)


@pytest.mark.parametrize("html", [None, "<p>Hi {{ name }}</p>\n<p>You are   {{ email }}.  </p>\n"])
def test_hundreds_of_messages_with_merge_fields_in_subject_and_body_verify(key, key_file, html):
    settings = signed_settings(key_file)
    template = CampaignTemplate.compile(campaign(body_html=html, subject="Grüße, {{ name }}!"), Mailing.of(settings))
    for i in range(300):
        name = NAMES[i % len(NAMES)] + (f" {i}" if i % 3 else "")
        raw = template.render(1000 + i, f"user{i}@example.org", name)
        assert raw.startswith(
            b"DKIM-Signature: v=1; a="
            + (b"ed25519" if isinstance(key, ed25519.Ed25519PrivateKey) else b"rsa")
            + b"-sha256; c=relaxed/relaxed;"
        )
        assert verified(raw, key), raw[:600]
        message = parse(raw)
        assert str(message["To"]).endswith(f"user{i}@example.org>") or str(message["To"]) == f"user{i}@example.org"


def test_a_body_without_merge_fields_is_hashed_once_and_every_message_still_verifies(key, key_file):
    template = CampaignTemplate.compile(
        campaign(body_text="The same for all.  \n\n\n", body_html="<p>Same</p>"), Mailing.of(signed_settings(key_file))
    )
    messages = [template.render(i, f"u{i}@example.org", f"Name {i}") for i in range(50)]
    assert template._dkim._body_hash is not None
    assert all(verified(raw, key) for raw in messages)


def test_bodies_whose_merge_fields_render_alike_are_hashed_once_and_only_the_last_few_are_kept(key, key_file):
    template = CampaignTemplate.compile(
        campaign(body_text="Hello {{ name }},\nthe same for all.\n"), Mailing.of(signed_settings(key_file))
    )
    alike = [template.render(i, f"u{i}@example.org", "Jane" if i % 2 else "Joan") for i in range(20)]
    assert len(template._dkim._bodies) == 2  # one body hash for each body that two names make
    assert all(verified(raw, key) for raw in alike)
    distinct = [template.render(i, f"u{i}@example.org", f"Name {i}") for i in range(dkim.BODY_HASHES + 10)]
    assert len(template._dkim._bodies) <= dkim.BODY_HASHES
    assert all(verified(raw, key) for raw in distinct[-3:])


@pytest.mark.parametrize("bits", [2048, 3072])
def test_a_large_rsa_key_signs_off_the_event_loop_rsa_2048_and_ed25519_on_it(tmp_path, bits):
    """A signature with an RSA key above 2,048 bits is a millisecond or more of OpenSSL, which releases the GIL: the
    sender renders such a message in a worker thread (actors/sender.py, `costly`). An RSA-2048 one (~0.3 ms) costs
    the loop less there than the thread's hand-over does, and an Ed25519 one tens of microseconds: both stay."""
    path = tmp_path / "rsa.pem"
    path.write_bytes(pem(rsa.generate_private_key(public_exponent=65537, key_size=bits)))
    ed25519_path = tmp_path / "ed25519.pem"
    ed25519_path.write_bytes(pem(ed25519.Ed25519PrivateKey.generate()))
    signed = CampaignTemplate.compile(campaign(), Mailing.of(signed_settings(str(path))))
    assert signed.costly is (bits > dkim.LOOP_RSA_BITS)
    assert not CampaignTemplate.compile(campaign(), Mailing.of(signed_settings(str(ed25519_path)))).costly
    assert not CampaignTemplate.compile(campaign(), Mailing.of(make_settings())).costly


def test_a_changed_body_or_header_fails_verification(key, key_file):
    raw = CampaignTemplate.compile(campaign(), Mailing.of(signed_settings(key_file))).render(
        7, "jane@example.org", "Jane"
    )
    assert verified(raw, key)
    assert not verified(raw.replace(b"Hello Jane", b"Hello Joan"), key)
    assert not verified(raw.replace(b"Subject: News for Jane", b"Subject: News for Joan"), key)


def test_signing_with_a_raw_ed25519_seed_as_dkimpy_writes_it(tmp_path):
    key = ed25519.Ed25519PrivateKey.generate()
    seed = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    path = tmp_path / "seed.key"
    path.write_text(__import__("base64").b64encode(seed).decode() + "\n")
    raw = CampaignTemplate.compile(campaign(), Mailing.of(signed_settings(str(path)))).render(1, "a@example.org", "A")
    assert verified(raw, key)


def test_relaxed_body_canonicalisation_matches_the_rfc_examples():
    assert dkim.relaxed_body(b" C \r\nD \t E\r\n\r\n\r\n") == b" C\r\nD E\r\n"
    assert dkim.relaxed_body(b"") == b""
    assert dkim.relaxed_body(b"\r\n\r\n") == b""
    assert dkim.relaxed_body(b"no end") == b"no end\r\n"


def test_relaxed_header_canonicalisation_matches_the_rfc_example():
    fields = dkim.relaxed_headers(b"A: X\r\nB : Y\t\r\n\tZ  ")
    assert [canonical for _, canonical in fields] == [b"a:X\r\n", b"b:Y Z\r\n"]


_LINE = st.text(st.sampled_from("ab \t=.:"), max_size=12).map(str.encode)
_VALUE = st.lists(_LINE, min_size=1, max_size=3).map(lambda lines: b"\r\n ".join(lines))  # folded values


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"To", b"Subject", b"X-A ", b"date"]), _VALUE), min_size=1, max_size=5))
def test_a_block_of_whole_fields_canonicalises_as_the_general_header_rule(fields):
    block = b"".join(name + b":" + value + b"\r\n" for name, value in fields)
    names, canonical = dkim._relaxed_fields(block)
    reference = dkim.relaxed_headers(block[:-2])
    assert names == tuple(name for name, _ in reference)
    assert canonical == b"".join(field for _, field in reference)


_NAMES = [b"To", b"Subject", b"Date", b"Message-ID", b"List-Unsubscribe"]
_ATOMS = st.lists(st.text(st.sampled_from("ab=.:<>\t"), max_size=8).map(str.encode), max_size=4)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(_ATOMS, st.lists(st.booleans(), max_size=4)), min_size=len(_NAMES), max_size=len(_NAMES)))
def test_the_message_fields_as_render_writes_them_canonicalise_as_the_general_header_rule(values):
    """``Name: value`` with atoms joined by a space or folded (CRLF SP), empty values, tabs, runs of
    spaces and colons at a line's end: the canonical form ``sign`` hashes is the general rule's."""
    signer = dkim.Signer(DOMAIN, SELECTOR, ed25519.Ed25519PrivateKey.generate())
    campaign = signer.prepare(b"From: a@example.org\r\n", names=tuple(_NAMES))
    fields = []
    for name, (atoms, folds) in zip(_NAMES, values, strict=True):
        value = b""
        for i, atom in enumerate(atoms):
            value += atom if i == 0 else (b"\r\n " if i - 1 < len(folds) and folds[i - 1] else b" ") + atom
        fields.append(name + (b": " + value if value else b":") + b"\r\n")
    reference = dkim.relaxed_headers(b"".join(fields)[:-2])
    assert campaign._canonical_fields(fields) == b"".join(field for _, field in reference)


_PIECE = st.lists(st.text(st.sampled_from("ab \t"), max_size=6), min_size=1, max_size=3).map(
    lambda lines: "".join(line + "\r\n" for line in lines).encode()
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _PIECE), max_size=6), st.binary(max_size=3))
def test_a_body_hashed_by_pieces_hashes_as_the_whole_body(pieces, tail):
    """Pieces known at prepare time and pieces seen only per message, empty lines at the end that
    span pieces, and a last part that is not whole lines: the hash is the whole body's."""
    signer = dkim.Signer(DOMAIN, SELECTOR, ed25519.Ed25519PrivateKey.generate())
    campaign = signer.prepare(b"From: a@example.org\r\n", [piece for known, piece in pieces if known])
    parts = [piece for _, piece in pieces] + ([tail] if tail else [])
    expected = dkim.base64.b64encode(dkim.hashlib.sha256(dkim.relaxed_body(b"".join(parts))).digest())
    assert campaign.body_hash(parts) == expected


# -- start-up -------------------------------------------------------------------------------


def einmal_run(env_overrides: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_")}
    env.update(EINMAL_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none", **env_overrides)
    return subprocess.run(
        [sys.executable, "-m", "service", "run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def unreadable(tmp_path) -> str:
    path = tmp_path / "secret.pem"
    path.write_bytes(pem(ed25519.Ed25519PrivateKey.generate()))
    path.chmod(0)
    return str(path)


def wrong_kind(tmp_path) -> str:
    path = tmp_path / "ec.pem"
    path.write_bytes(pem(ec.generate_private_key(ec.SECP256R1())))
    return str(path)


def not_a_key(tmp_path) -> str:
    path = tmp_path / "cert.txt"
    path.write_text("hello\n")
    return str(path)


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda tmp: str(tmp / "missing.pem"), "no such file"),
        (not_a_key, "not a PEM private key"),
        (wrong_kind, "RSA or Ed25519"),
        pytest.param(
            unreadable, "cannot read it", marks=pytest.mark.skipif(os.geteuid() == 0, reason="root reads all")
        ),
    ],
)
def test_a_bad_key_file_stops_einmal_run_with_one_line_and_exit_2(tmp_path, make, says):
    done = einmal_run(
        {"EINMAL_DKIM_DOMAIN": DOMAIN, "EINMAL_DKIM_SELECTOR": SELECTOR, "EINMAL_DKIM_PRIVATE_KEY_FILE": make(tmp_path)}
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "EINMAL_DKIM_PRIVATE_KEY_FILE" in done.stderr and says in done.stderr


@pytest.mark.parametrize(
    "env, says",
    [
        ({"EINMAL_DKIM_DOMAIN": DOMAIN}, "EINMAL_DKIM_SELECTOR, EINMAL_DKIM_PRIVATE_KEY_FILE: must be set too"),
        (
            {
                "EINMAL_DKIM_DOMAIN": "acme.example\r\nBcc: x@evil.example",
                "EINMAL_DKIM_SELECTOR": SELECTOR,
                "EINMAL_DKIM_PRIVATE_KEY_FILE": "/k",
            },
            "EINMAL_DKIM_DOMAIN",
        ),
        (
            {"EINMAL_DKIM_DOMAIN": DOMAIN, "EINMAL_DKIM_SELECTOR": "s; h=from", "EINMAL_DKIM_PRIVATE_KEY_FILE": "/k"},
            "EINMAL_DKIM_SELECTOR",
        ),
    ],
)
def test_incomplete_or_injected_dkim_settings_are_one_line_and_exit_2(env, says):
    done = einmal_run(env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and says in done.stderr


def test_an_international_dkim_domain_is_signed_as_its_a_label():
    assert (
        Settings(dkim_domain="bücher.example", dkim_selector="s", dkim_private_key_file="/k").dkim_domain
        == "xn--bcher-kva.example"
    )


# -- international addresses ------------------------------------------------------------------


async def _sent(server, template, email: str, name: str):
    """``template`` rendered for ``email`` and sent to ``server``: what the server received."""
    from service.smtp.connection import Outcome, SmtpConnection
    from tests.smtp.test_smtp import settings_for

    connection = SmtpConnection(Relaying.of(settings_for(server)))
    try:
        result = await connection.send(template.envelope_from, email, template.render(5, email, name))
    finally:
        await connection.close()
    assert result.outcome is Outcome.SENT, result.reply
    [received] = server.messages
    return received


@pytest.mark.anyio
async def test_an_international_domain_is_its_a_label_in_to_and_from_for_a_relay_without_smtputf8(
    key, key_file, make_smtp_server
):
    template = CampaignTemplate.compile(
        campaign(from_address="Bücher News <news@bücher.example>"), Mailing.of(signed_settings(key_file))
    )
    received = await _sent(make_smtp_server(), template, "hans@bücher.example", "Hans Müller")

    assert received.rcpt_tos == ("hans@xn--bcher-kva.example",)
    assert received.data.isascii()  # RFC 5322 without RFC 6532: what a relay without SMTPUTF8 may carry
    message = parse(received.data)
    assert str(message["To"]) == "Hans Müller <hans@xn--bcher-kva.example>"
    assert message["To"].addresses[0].addr_spec == "hans@xn--bcher-kva.example"
    assert str(message["From"]) == "Bücher News <news@xn--bcher-kva.example>"
    assert verified(received.data, key)


@pytest.mark.anyio
async def test_a_non_ascii_local_part_keeps_its_utf8_address_over_a_relay_with_smtputf8(
    key, key_file, make_smtp_server
):
    template = CampaignTemplate.compile(campaign(), Mailing.of(signed_settings(key_file)))
    received = await _sent(make_smtp_server(smtputf8=True), template, "jörg@bücher.example", "Jörg")

    assert received.rcpt_tos == ("jörg@bücher.example",)
    message = email.parser.Parser(policy=email.policy.default).parsestr(received.data.decode("utf-8"))  # RFC 6532
    assert message["To"].addresses[0].addr_spec == "jörg@bücher.example"
    assert str(message["To"]) == "Jörg <jörg@bücher.example>"
    assert verified(received.data, key)


# -- through a node ---------------------------------------------------------------------------


async def sent_by_a_node(conn, dsn: str, tmp_path, campaign_id: int, selectors: str, key_files: str) -> list[bytes]:
    """Every message a node signing with these selectors and keys delivered for the campaign."""
    from service.smtp.capture import capture_server
    from tests.support.pipeline import approve, node_env, start_node, stop_node, wait_status

    async with capture_server(tmp_path / "mail") as (_, port):
        env = node_env(
            dsn, port, EINMAL_DKIM_DOMAIN=DOMAIN, EINMAL_DKIM_SELECTOR=selectors, EINMAL_DKIM_PRIVATE_KEY_FILE=key_files
        )
        node = start_node(env, tmp_path / "node.log")
        try:
            await approve(conn, campaign_id)
            await wait_status(conn, campaign_id, "sent", timeout=300)
        finally:
            assert await stop_node(node) == 0, (tmp_path / "node.log").read_text()
    return [path.read_bytes() for path in (tmp_path / "mail").glob("*.eml")]


@pytest.mark.anyio
async def test_every_message_a_node_sends_carries_a_signature_dkimpy_verifies(key, key_file, conn, dsn, tmp_path):
    from tests.support.pipeline import seed

    campaign_id = await seed(
        conn,
        [f"user{i}@example.com" for i in range(200)],
        body="Hello {{ name }},\n..a line that starts with a dot\nyou are {{ email }}.\n",
    )
    await conn.execute("UPDATE einmal.campaigns SET subject = 'Für {{ name }}' WHERE id = $1", campaign_id)
    captured = await sent_by_a_node(conn, dsn, tmp_path, campaign_id, SELECTOR, key_file)
    assert len(captured) == 200
    assert all(verified(data, key) for data in captured)


# -- dual signing (RFC 8463 §1: Ed25519 beside RSA for the verifiers that know only RSA) ---------

DUAL = (("rsa2026", "rsa"), ("ed2026", "ed25519"))  # (selector, algorithm), in the variables' order


@pytest.fixture(scope="module")
def dual_keys():
    return {
        "rsa2026": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "ed2026": ed25519.Ed25519PrivateKey.generate(),
    }


@pytest.fixture
def dual_settings(dual_keys, tmp_path) -> Settings:
    files = []
    for selector, key in dual_keys.items():
        (tmp_path / f"{selector}.pem").write_bytes(pem(key))
        files.append(str(tmp_path / f"{selector}.pem"))
    return signed_settings(", ".join(files), dkim_selector="rsa2026, ed2026")


def dual_dns(keys):
    records = {f"{selector}._domainkey.{DOMAIN}": dkim.public_record(key) for selector, key in keys.items()}

    def dnsfunc(name, timeout=5):
        return records.get((name.decode() if isinstance(name, bytes) else name).rstrip("."))

    return dnsfunc


def verified_each(message: bytes, keys) -> list[bool]:
    """dkimpy's verdict on every DKIM-Signature of the message, from the top."""
    count = sum(1 for name, _ in dkimpy.rfc822_parse(message)[0] if name.lower() == b"dkim-signature")
    verdicts = []
    for i in range(count):
        try:
            verdicts.append(dkimpy.DKIM(message, minkey=1024).verify(idx=i, dnsfunc=dual_dns(keys)))
        except dkimpy.DKIMException:  # what dkimpy.verify() reads as False, e.g. a body hash mismatch
            verdicts.append(False)
    return verdicts


def drop_signature(raw: bytes, index: int) -> bytes:
    """The message without its index-th DKIM-Signature field."""
    head, body = raw.split(b"\r\n\r\n", 1)
    fields: list[bytes] = []
    for line in head.split(b"\r\n"):
        if line[:1] in (b" ", b"\t"):
            fields[-1] += b"\r\n" + line
        else:
            fields.append(line)
    signatures = [i for i, field in enumerate(fields) if field.lower().startswith(b"dkim-signature:")]
    del fields[signatures[index]]
    return b"\r\n".join(fields) + b"\r\n\r\n" + body


def short_rsa_key() -> rsa.RSAPrivateKey:
    """A 511-bit RSA key (cryptography generates none under 1024 bits): 2^255-19 and 2^256-189 are prime."""
    p, q, e = 2**255 - 19, 2**256 - 189, 65537
    d = pow(e, -1, (p - 1) * (q - 1))
    return rsa.RSAPrivateNumbers(
        p, q, d, rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q), rsa.rsa_crt_iqmp(p, q), rsa.RSAPublicNumbers(e, p * q)
    ).private_key()


def signature_tags(message) -> list[dict[str, str]]:
    tags = []
    for field in message.get_all("DKIM-Signature"):
        value = "".join(str(field).split())
        tags.append(dict(tag.split("=", 1) for tag in value.split(";") if tag))
    return tags


@pytest.mark.anyio
@pytest.mark.parametrize("html", [None, "<p>Hi {{ name }}</p>\n"])
async def test_dual_signed_messages_through_an_smtp_server_verify_with_both_keys(
    dual_keys, dual_settings, html, make_smtp_server
):
    from service.smtp.connection import Outcome, SmtpConnection
    from tests.smtp.test_smtp import settings_for

    template = CampaignTemplate.compile(
        campaign(body_html=html, subject="Grüße, {{ name }}!"), Mailing.of(dual_settings)
    )
    server = make_smtp_server()
    connection = SmtpConnection(Relaying.of(settings_for(server)))
    try:
        for i in range(40):
            address = f"user{i}@example.org"
            result = await connection.send(
                template.envelope_from, address, template.render(100 + i, address, NAMES[i % len(NAMES)])
            )
            assert result.outcome is Outcome.SENT, result.reply
    finally:
        await connection.close()
    assert len(server.messages) == 40
    for received in server.messages:
        assert received.data.startswith(b"DKIM-Signature: v=1; a=rsa-sha256;")
        assert verified_each(received.data, dual_keys) == [True, True], received.data[:1200]


def test_a_dual_signed_message_has_two_signatures_over_the_same_fields_and_body(dual_keys, dual_settings):
    template = CampaignTemplate.compile(campaign(), Mailing.of(dual_settings))
    raw = template.render(7, "jane@example.org", "Jane")
    message = parse(raw)
    tags = signature_tags(message)
    assert [(tag["s"], tag["a"]) for tag in tags] == [("rsa2026", "rsa-sha256"), ("ed2026", "ed25519-sha256")]
    assert tags[0]["h"] == tags[1]["h"] and "dkim-signature" not in tags[0]["h"].lower()
    assert tags[0]["bh"] == tags[1]["bh"] and tags[0]["t"] == tags[1]["t"] and tags[0]["d"] == DOMAIN
    assert [name for name, _ in message.items()][:3] == ["DKIM-Signature", "DKIM-Signature", "From"]
    assert str(message["Feedback-ID"]).endswith(f":einmal:{DOMAIN}")
    assert verified_each(raw, dual_keys) == [True, True]
    # each signature alone verifies: neither covers the other
    assert verified_each(drop_signature(raw, 0), dual_keys) == [True]
    assert verified_each(drop_signature(raw, 1), dual_keys) == [True]
    assert verified_each(raw.replace(b"Hello Jane", b"Hello Joan"), dual_keys) == [False, False]


def test_the_single_key_form_still_makes_one_signature(key, key_file):
    raw = CampaignTemplate.compile(campaign(), Mailing.of(signed_settings(key_file))).render(
        7, "jane@example.org", "Jane"
    )
    assert len(parse(raw).get_all("DKIM-Signature")) == 1
    assert verified(raw, key)


def _dual_env(selectors: str, files: str) -> dict[str, str]:
    return {"EINMAL_DKIM_DOMAIN": DOMAIN, "EINMAL_DKIM_SELECTOR": selectors, "EINMAL_DKIM_PRIVATE_KEY_FILE": files}


def _key_files(tmp_path, *keys) -> list[str]:
    paths = []
    for i, key in enumerate(keys):
        path = tmp_path / f"key{i}.pem"
        path.write_bytes(pem(key))
        paths.append(str(path))
    return paths


@pytest.mark.parametrize(
    "selectors, files, variable, says",
    [
        ("a,b", "{0}", "EINMAL_DKIM_SELECTOR, EINMAL_DKIM_PRIVATE_KEY_FILE", "2 selectors and 1 key file"),
        ("a", "{0},{1}", "EINMAL_DKIM_SELECTOR, EINMAL_DKIM_PRIVATE_KEY_FILE", "1 selector and 2 key files"),
        ("a,A", "{0},{1}", "EINMAL_DKIM_SELECTOR", "'A' is given twice"),
        ("a,,b", "{0},{1},{0}", "EINMAL_DKIM_SELECTOR", "an empty item"),
        ("a,b", "{0},", "EINMAL_DKIM_PRIVATE_KEY_FILE", "an empty item"),
        ("a,b", "{0},{0}", "EINMAL_DKIM_PRIVATE_KEY_FILE", "is given twice"),
        ("a,b,c,d,e", "{0},{1},{2},{3},{4}", "EINMAL_DKIM_SELECTOR", "at most 4"),
        ("a,b;h=from", "{0},{1}", "EINMAL_DKIM_SELECTOR", "DNS labels"),
        ("a,b", "{0},{missing}", "EINMAL_DKIM_PRIVATE_KEY_FILE", "no such file"),
        ("a,b", "{0},{ec}", "EINMAL_DKIM_PRIVATE_KEY_FILE", "RSA or Ed25519"),
        ("a,b", "{0},{short}", "EINMAL_DKIM_PRIVATE_KEY_FILE", "at least 1024"),
    ],
)
def test_bad_dual_dkim_settings_are_one_line_and_exit_2(tmp_path, selectors, files, variable, says):
    keys = [ed25519.Ed25519PrivateKey.generate() for _ in range(5)]
    paths = _key_files(tmp_path, *keys)
    short = tmp_path / "short.pem"
    short_key = short_rsa_key()
    short.write_bytes(pem(short_key))
    done = einmal_run(
        _dual_env(
            selectors, files.format(*paths, missing=tmp_path / "missing.pem", ec=wrong_kind(tmp_path), short=short)
        )
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"einmal: {variable}: ") and says in done.stderr, done.stderr
    for key in [*keys, short_key]:  # no key material, whatever the error
        assert pem(key).decode().splitlines()[1][:20] not in done.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads all")
def test_an_unreadable_second_key_file_is_one_line_and_exit_2(tmp_path):
    [first] = _key_files(tmp_path, rsa.generate_private_key(public_exponent=65537, key_size=2048))
    done = einmal_run(_dual_env("rsa,ed", f"{first},{unreadable(tmp_path)}"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "EINMAL_DKIM_PRIVATE_KEY_FILE" in done.stderr and "cannot read it" in done.stderr


@pytest.mark.anyio
async def test_a_node_with_two_keys_sends_every_message_signed_by_both(dual_keys, conn, dsn, tmp_path):
    from tests.support.pipeline import seed

    files = []
    for selector, key in dual_keys.items():
        (tmp_path / f"{selector}.pem").write_bytes(pem(key))
        files.append(str(tmp_path / f"{selector}.pem"))
    campaign_id = await seed(conn, [f"user{i}@example.com" for i in range(60)], body="Hello {{ name }}\n")
    captured = await sent_by_a_node(conn, dsn, tmp_path, campaign_id, ",".join(dual_keys), ",".join(files))
    assert len(captured) == 60
    assert all(verified_each(data, dual_keys) == [True, True] for data in captured)
