"""SmtpConnection against real SMTP servers on loopback: every outcome class, exactly.

The tests that take `smtp_server` run twice: against a server that offers PIPELINING
(MAIL, RCPT and DATA arrive in one write) and against one that does not.
"""

import pytest

from service.relays import Relaying
from service.settings import Settings
from service.smtp.connection import Outcome, SmtpConnection, SmtpUnavailable, dot_stuff
from tests.support.smtp_servers import DROP, MID_DATA, FaultServer

pytestmark = pytest.mark.anyio

SENDER = "news@example.test"


def settings_for(server: FaultServer, **overrides) -> Settings:
    values = {
        "smtp_host": server.host,
        "smtp_port": server.port,
        "smtp_tls": "none",
        "smtp_tls_ca_file": None,
        "smtp_username": None,
        "smtp_password": None,
        "smtp_timeout_seconds": 5.0,
    }
    values.update(overrides)
    return Settings(**values)


def message(n: int = 1, body: bytes = b"Hello.\r\n") -> bytes:
    head = (
        b"From: news@example.test\r\nTo: someone@example.test\r\nSubject: hello\r\n"
        b"Message-ID: <campaign.7.%d@example.test>\r\n\r\n" % n
    )
    return head + body


@pytest.fixture(params=[True, False], ids=["pipelining", "one-at-a-time"])
def smtp_server(request, make_smtp_server) -> FaultServer:
    return make_smtp_server(pipelining=request.param)


@pytest.fixture
async def connect():
    opened: list[SmtpConnection] = []

    def make(server: FaultServer, **overrides) -> SmtpConnection:
        connection = SmtpConnection(Relaying.of(settings_for(server, **overrides)))
        opened.append(connection)
        return connection

    yield make
    for connection in opened:
        await connection.close()


async def test_accepted_message_is_sent_and_arrives_byte_for_byte(smtp_server, connect):
    body = b".starts with a dot\r\n..two dots\r\n.\r\nnot a dot line: a.\r\n.\r\n"
    sent = message(1, body)

    result = await connect(smtp_server).send(SENDER, "ann@example.test", sent)

    assert result.outcome is Outcome.SENT
    assert result.reply.startswith("250 ")
    [received] = smtp_server.messages
    assert received.data == sent
    assert (received.mail_from, received.rcpt_tos) == (SENDER, ("ann@example.test",))
    assert received.message_id == "<campaign.7.1@example.test>"


async def test_message_without_final_crlf_or_starting_with_a_dot_round_trips(smtp_server, connect):
    connection = connect(smtp_server)

    assert (await connection.send(SENDER, "ann@example.test", b".dot\r\nlast line")).outcome is Outcome.SENT

    assert smtp_server.messages[0].data == b".dot\r\nlast line\r\n"


def test_dot_stuffing_doubles_leading_dots_only():
    assert dot_stuff(b".a\r\nb.\r\n.\r\n..c") == b"..a\r\nb.\r\n..\r\n...c\r\n"
    assert dot_stuff(b"") == b"\r\n"


@pytest.mark.parametrize("stage", ["mail", "rcpt", "data", "data_end"])
async def test_4xx_is_transient_and_the_connection_is_reused(smtp_server, connect, stage):
    smtp_server.inject(stage, "451 4.3.0 try again later", times=1)
    connection = connect(smtp_server)

    first = await connection.send(SENDER, "ann@example.test", message(1))
    second = await connection.send(SENDER, "bob@example.test", message(2))

    assert first.outcome is Outcome.TRANSIENT
    assert first.reply == "451 4.3.0 try again later"
    assert second.outcome is Outcome.SENT
    assert [m.rcpt_tos for m in smtp_server.messages] == [("bob@example.test",)]
    assert smtp_server.connections == 1


@pytest.mark.parametrize("stage", ["mail", "rcpt", "data", "data_end"])
async def test_5xx_is_permanent_with_the_reply_and_the_connection_is_reused(smtp_server, connect, stage):
    smtp_server.inject(stage, "554 5.7.1 rejected by policy", times=1)
    connection = connect(smtp_server)

    first = await connection.send(SENDER, "ann@example.test", message(1))
    second = await connection.send(SENDER, "bob@example.test", message(2))

    assert (first.outcome, first.reply) == (Outcome.PERMANENT, "554 5.7.1 rejected by policy")
    assert second.outcome is Outcome.SENT
    assert len(smtp_server.messages) == 1
    assert smtp_server.connections == 1


async def test_unknown_user_in_one_domain_is_permanent_others_are_sent(smtp_server, connect):
    smtp_server.inject("rcpt", "550 5.1.1 no such user", domain="bounce.test")
    connection = connect(smtp_server)

    bounced = await connection.send(SENDER, "gone@bounce.test", message(1))
    delivered = await connection.send(SENDER, "ann@example.test", message(2))

    assert (bounced.outcome, bounced.reply) == (Outcome.PERMANENT, "550 5.1.1 no such user")
    assert delivered.outcome is Outcome.SENT


@pytest.mark.parametrize("stage", ["mail", "rcpt", "data"])
async def test_421_is_transient_and_the_next_send_reconnects(smtp_server, connect, stage):
    smtp_server.inject(stage, "421 4.3.2 shutting down", times=1)
    connection = connect(smtp_server)

    first = await connection.send(SENDER, "ann@example.test", message(1))
    second = await connection.send(SENDER, "ann@example.test", message(1))

    assert (first.outcome, first.reply) == (Outcome.TRANSIENT, "421 4.3.2 shutting down")
    assert second.outcome is Outcome.SENT
    assert smtp_server.connections == 2
    assert len(smtp_server.messages) == 1


async def test_421_after_end_of_data_is_transient_and_the_next_send_reconnects(smtp_server, connect):
    smtp_server.inject("data_end", "421 4.3.2 shutting down", times=1)
    connection = connect(smtp_server)

    first = await connection.send(SENDER, "ann@example.test", message(1))
    second = await connection.send(SENDER, "ann@example.test", message(1))

    assert first.outcome is Outcome.TRANSIENT
    assert second.outcome is Outcome.SENT
    assert smtp_server.connections == 2


@pytest.mark.parametrize("stage", ["mail", "rcpt", "data"])
async def test_connection_dropped_before_data_is_transient(smtp_server, connect, stage):
    smtp_server.inject(stage, DROP, times=1)  # on a fresh connection: not retried
    connection = connect(smtp_server)

    first = await connection.send(SENDER, "ann@example.test", message(1))
    second = await connection.send(SENDER, "ann@example.test", message(1))

    assert first.outcome is Outcome.TRANSIENT
    assert first.reply.startswith("connection lost before end of DATA")
    assert second.outcome is Outcome.SENT
    assert len(smtp_server.messages) == 1


async def test_connection_dropped_in_the_middle_of_data_is_transient_and_nothing_arrives(smtp_server, connect):
    # Far bigger than the socket buffers (the server stops reading before it aborts), so the
    # client is still writing the body: it sees the reset before it could write the final dot.
    body = b"x" * 998 + b"\r\n"
    big = message(1, body * 16_000)
    smtp_server.inject("data", MID_DATA, times=1)
    connection = connect(smtp_server)

    first = await connection.send(SENDER, "ann@example.test", big)
    second = await connection.send(SENDER, "ann@example.test", message(2))

    assert first.outcome is Outcome.TRANSIENT
    assert first.reply.startswith("connection lost before end of DATA")
    assert second.outcome is Outcome.SENT
    assert [m.message_id for m in smtp_server.messages] == ["<campaign.7.2@example.test>"]


async def test_connection_dropped_after_the_final_dot_without_reply_is_in_doubt(smtp_server, connect):
    smtp_server.inject("data_end", DROP, times=1)
    connection = connect(smtp_server)

    first = await connection.send(SENDER, "ann@example.test", message(1))
    second = await connection.send(SENDER, "bob@example.test", message(2))

    assert first.outcome is Outcome.IN_DOUBT
    assert first.reply.startswith("connection lost after end of DATA")
    assert second.outcome is Outcome.SENT
    assert [m.answered for m in await smtp_server.arrived(2)] == [False, True]


async def test_slow_reply_after_the_final_dot_is_in_doubt(smtp_server, connect):
    smtp_server.inject("data_end", None, delay=2.0, times=1)
    connection = connect(smtp_server, smtp_timeout_seconds=0.5)

    result = await connection.send(SENDER, "ann@example.test", message(1))

    assert result.outcome is Outcome.IN_DOUBT
    assert "timed out after 0.5s" in result.reply
    assert len(smtp_server.messages) == 1  # the server did take it: that is why it is in doubt


async def test_slow_reply_before_data_is_transient(smtp_server, connect):
    smtp_server.inject("mail", None, delay=3.0, times=1)
    connection = connect(smtp_server, smtp_timeout_seconds=1.5)  # room for a reconnect on a busy machine

    first = await connection.send(SENDER, "ann@example.test", message(1))
    second = await connection.send(SENDER, "ann@example.test", message(1))

    assert first.outcome is Outcome.TRANSIENT
    assert "timed out after 1.5s" in first.reply
    assert second.outcome is Outcome.SENT


async def test_idle_connection_closed_by_the_server_is_reopened_transparently(smtp_server, connect):
    connection = connect(smtp_server)
    assert (await connection.send(SENDER, "ann@example.test", message(1))).outcome is Outcome.SENT

    smtp_server.disconnect_all()
    result = await connection.send(SENDER, "bob@example.test", message(2))

    assert result.outcome is Outcome.SENT
    assert len(smtp_server.messages) == 2
    assert smtp_server.connections == 2


async def test_server_down_is_unavailable_then_up_later_is_sent(make_smtp_server, connect):
    server = make_smtp_server(start=False)
    connection = connect(server)

    with pytest.raises(SmtpUnavailable) as down:
        await connection.send(SENDER, "ann@example.test", message(1))
    server.start()
    result = await connection.send(SENDER, "ann@example.test", message(1))

    assert str(down.value).startswith(f"SMTP 127.0.0.1:{server.port}: connect failed: ")
    assert "\n" not in str(down.value)
    assert result.outcome is Outcome.SENT


async def test_starttls_with_a_trusted_certificate_is_sent(make_smtp_server, connect, smtp_certificate):
    server = make_smtp_server(tls="starttls", certificate=smtp_certificate)
    connection = connect(server, smtp_tls="starttls", smtp_tls_ca_file=str(smtp_certificate.cert))

    result = await connection.send(SENDER, "ann@example.test", message(1))

    assert result.outcome is Outcome.SENT
    assert len(server.messages) == 1


async def test_starttls_with_an_untrusted_certificate_is_unavailable(make_smtp_server, connect, smtp_certificate):
    server = make_smtp_server(tls="starttls", certificate=smtp_certificate)
    connection = connect(server, smtp_tls="starttls")

    with pytest.raises(SmtpUnavailable, match=r"STARTTLS failed: .*CERTIFICATE_VERIFY_FAILED"):
        await connection.send(SENDER, "ann@example.test", message(1))
    assert server.messages == []


async def test_starttls_required_but_not_offered_is_unavailable(smtp_server, connect, smtp_certificate):
    connection = connect(smtp_server, smtp_tls="starttls", smtp_tls_ca_file=str(smtp_certificate.cert))

    with pytest.raises(SmtpUnavailable, match="STARTTLS required but not offered"):
        await connection.send(SENDER, "ann@example.test", message(1))
    assert smtp_server.messages == []


async def test_implicit_tls_with_a_trusted_certificate_is_sent(make_smtp_server, connect, smtp_certificate):
    server = make_smtp_server(tls="tls", certificate=smtp_certificate)
    connection = connect(server, smtp_tls="tls", smtp_tls_ca_file=str(smtp_certificate.cert))

    result = await connection.send(SENDER, "ann@example.test", message(1))

    assert result.outcome is Outcome.SENT


async def test_auth_accepted_is_sent(make_smtp_server, connect):
    server = make_smtp_server(users={"einmal": "s3cret"})
    connection = connect(server, smtp_username="einmal", smtp_password="s3cret")

    result = await connection.send(SENDER, "ann@example.test", message(1))

    assert result.outcome is Outcome.SENT


async def test_auth_rejected_is_unavailable_in_one_line(make_smtp_server, connect):
    server = make_smtp_server(users={"einmal": "s3cret"})
    connection = connect(server, smtp_username="einmal", smtp_password="wrong-password")

    with pytest.raises(SmtpUnavailable) as rejected:
        await connection.send(SENDER, "ann@example.test", message(1))

    assert str(rejected.value) == (
        f"SMTP 127.0.0.1:{server.port}: authentication rejected: 535 5.7.8 Authentication credentials invalid"
    )
    assert server.messages == []


async def test_many_messages_share_one_connection(smtp_server, connect):
    connection = connect(smtp_server)

    results = [await connection.send(SENDER, f"r{n}@example.test", message(n)) for n in range(50)]
    await connection.close()
    after_close = await connection.send(SENDER, "late@example.test", message(50))

    assert {r.outcome for r in results} == {Outcome.SENT}
    assert [m.message_id for m in smtp_server.messages[:50]] == [f"<campaign.7.{n}@example.test>" for n in range(50)]
    assert after_close.outcome is Outcome.SENT
    assert smtp_server.connections == 2
    assert smtp_server.duplicates() == {}


async def test_address_with_a_line_break_is_permanent_and_nothing_is_sent(smtp_server, connect):
    connection = connect(smtp_server)

    bad = await connection.send(SENDER, "ann@example.test\r\nRCPT TO:<x@evil.test>", message(1))
    good = await connection.send(SENDER, "ann@example.test", message(2))

    assert bad.outcome is Outcome.PERMANENT
    assert good.outcome is Outcome.SENT
    assert [m.rcpt_tos for m in smtp_server.messages] == [("ann@example.test",)]


async def test_seeded_random_faults_repeat_exactly(make_smtp_server, connect):
    outcomes = []
    for _ in range(2):
        server = make_smtp_server(seed=42)
        server.inject("data_end", "451 4.3.0 busy", probability=0.3)
        connection = connect(server)
        outcomes.append([(await connection.send(SENDER, "a@example.test", message(n))).outcome for n in range(30)])

    assert outcomes[0] == outcomes[1]
    assert 0 < outcomes[0].count(Outcome.TRANSIENT) < 30


async def test_a_server_offering_pipelining_gets_mail_rcpt_and_data_in_one_write(make_smtp_server, connect):
    server = make_smtp_server(pipelining=True)
    connection = connect(server)

    results = [await connection.send(SENDER, f"r{n}@example.test", message(n)) for n in range(5)]

    assert {r.outcome for r in results} == {Outcome.SENT}
    assert connection.pipelining
    assert server.pipelined == 5
    assert len(server.messages) == 5


async def test_a_server_without_pipelining_gets_one_command_at_a_time(make_smtp_server, connect):
    server = make_smtp_server(pipelining=False)
    connection = connect(server)
    server.inject("rcpt", "550 5.1.1 no such user", times=1)

    results = [await connection.send(SENDER, f"r{n}@example.test", message(n)) for n in range(5)]

    assert [r.outcome for r in results] == [Outcome.PERMANENT] + [Outcome.SENT] * 4
    assert not connection.pipelining
    assert server.pipelined == 0
    assert len(server.messages) == 4


async def test_refusals_pipelined_behind_each_other_keep_replies_in_step(make_smtp_server, connect):
    # MAIL refused: RCPT and DATA were already sent and get 503s; RCPT refused: DATA gets a 503.
    # Each is read and ignored before the RSET, so no reply is ever taken for a later command's.
    server = make_smtp_server(pipelining=True)
    server.inject("mail", "451 4.3.0 busy", times=1)
    server.inject("rcpt", "550 5.1.1 no such user", domain="bounce.test")
    server.inject("rcpt", "452 4.2.2 mailbox full", domain="full.test")
    connection = connect(server)
    plan = [
        ("ann@example.test", Outcome.TRANSIENT, "451 4.3.0 busy"),
        ("gone@bounce.test", Outcome.PERMANENT, "550 5.1.1 no such user"),
        ("bob@example.test", Outcome.SENT, "250 "),
        ("max@full.test", Outcome.TRANSIENT, "452 4.2.2 mailbox full"),
        ("gone@bounce.test", Outcome.PERMANENT, "550 5.1.1 no such user"),
        ("cy@example.test", Outcome.SENT, "250 "),
    ]

    results = [await connection.send(SENDER, to, message(n)) for n, (to, _, _) in enumerate(plan)]

    assert [(r.outcome, r.reply[: len(p[2])]) for r, p in zip(results, plan, strict=True)] == [
        (outcome, reply) for _, outcome, reply in plan
    ]
    assert [m.rcpt_tos for m in server.messages] == [("bob@example.test",), ("cy@example.test",)]
    assert server.connections == 1
    assert server.pipelined == len(plan)


# -- international addresses --------------------------------------------------------------


async def test_an_international_domain_goes_as_its_a_label_to_a_relay_without_smtputf8(smtp_server, connect):
    result = await connect(smtp_server).send("news@bücher.example", "hans@bücher.example", message(1))

    assert result.outcome is Outcome.SENT, result.reply
    [received] = smtp_server.messages
    assert (received.mail_from, received.rcpt_tos) == ("news@xn--bcher-kva.example", ("hans@xn--bcher-kva.example",))


async def test_a_non_ascii_local_part_fails_saying_it_needs_smtputf8(smtp_server, connect):
    result = await connect(smtp_server).send(SENDER, "jörg@bücher.example", message(1))

    assert result.outcome is Outcome.PERMANENT
    assert "non-ASCII local part" in result.reply and "SMTPUTF8" in result.reply
    assert smtp_server.messages == []


async def test_a_relay_with_smtputf8_gets_the_address_as_written(make_smtp_server, connect):
    server = make_smtp_server(smtputf8=True)

    result = await connect(server).send(SENDER, "jörg@bücher.example", message(1))

    assert result.outcome is Outcome.SENT, result.reply
    assert server.messages[0].rcpt_tos == ("jörg@bücher.example",)
