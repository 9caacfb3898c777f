"""The report parser: DSNs and ARF reports classified, anything else ignored or refused, never a crash."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.inbound import bounces
from tests.support import reports


def test_a_failed_5xx_dsn_is_a_hard_bounce_and_its_returned_message_id_names_nothing() -> None:
    (report,) = bounces.parse(reports.dsn("a@example.com", original_id="<campaign.7.42@example.com>"))
    assert report == bounces.Report("hard", "5.1.1", "a@example.com", None, "dsn:<r1@relay.test>", reason="no_mailbox")


def test_a_dsn_naming_several_recipients_is_one_report_for_each_that_failed_or_was_delayed() -> None:
    found = bounces.parse(
        reports.dsn_of(
            [
                ("a@example.com", "failed", "5.1.1"),
                ("B@Example.com", "delivered", "2.0.0"),
                ("c@example.com", "delayed", "4.4.1"),
                ("d@example.com", "failed", "5.2.1"),
            ],
            original_id="<campaign.7.42@example.com>",
        )
    )
    assert [(r.kind, r.status, r.recipient) for r in found] == [
        ("hard", "5.1.1", "a@example.com"),
        ("soft", "4.4.1", "c@example.com"),
        ("hard", "5.2.1", "d@example.com"),
    ]
    assert [r.event_id for r in found] == [f"dsn:<r1@relay.test>:{who}@example.com" for who in "acd"]


@pytest.mark.parametrize(("action", "status"), [("delayed", "4.4.1"), ("failed", "4.2.2"), ("Delayed", "4.7.0")])
def test_delayed_or_4xx_is_a_soft_bounce(action: str, status: str) -> None:
    assert [r.kind for r in bounces.parse(reports.dsn("a@example.com", action=action, status=status))] == ["soft"]


@pytest.mark.parametrize("action", ["delivered", "relayed", "expanded"])
def test_a_dsn_of_success_is_ignored(action: str) -> None:
    assert bounces.parse(reports.dsn("a@example.com", action=action, status="2.0.0")) == ()


def test_an_abuse_report_is_a_complaint_and_other_feedback_is_ignored() -> None:
    (report,) = bounces.parse(reports.arf(original_id="<campaign.3.9@example.com>"))
    assert (report.kind, report.original, report.event_id) == ("complaint", None, "arf:<arf1@isp.test>")
    assert bounces.parse(reports.arf(feedback="not-spam")) == ()


def test_mail_that_is_not_a_report_is_ignored() -> None:
    assert bounces.parse(reports.auto_reply()) == ()
    assert bounces.parse(b"") == ()


def test_a_report_without_a_message_id_gets_an_id_from_its_content() -> None:
    first = bounces.parse(reports.dsn("a@example.com", report_id=None))[0].event_id
    assert first.startswith("dsn:sha256:")
    assert bounces.parse(reports.dsn("a@example.com", report_id=None))[0].event_id == first
    assert bounces.parse(reports.dsn("b@example.com", report_id=None))[0].event_id != first


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (reports.dsn_of([("a@example.com", "failed", "5.1.1")], extra_parts=bounces.MAX_PARTS), "MIME parts"),
        (
            reports.dsn_of([(f"r{n}@example.com", "failed", "5.1.1") for n in range(bounces.MAX_RECIPIENTS + 1)]),
            "recipients",
        ),
        (b"Content-Type: multipart/report\r" + b"--b\r" * (bounces.MAX_PARTS + 1), "MIME parts"),  # CR line endings
        (reports.dsn("a@example.com").replace(b"Action:", b"ACTION:") * (bounces.MAX_RECIPIENTS + 1), "recipients"),
    ],
)
def test_a_report_past_its_bounds_is_too_large_before_it_is_parsed(data: bytes, why: str) -> None:
    with pytest.raises(bounces.TooLarge, match=why):
        bounces.parse(data)


def test_a_report_at_its_bounds_is_read() -> None:
    blocks = [(f"r{n}@example.com", "failed", "5.1.1") for n in range(bounces.MAX_RECIPIENTS)]
    data = reports.dsn_of(blocks, extra_parts=bounces.MAX_PARTS - 4)  # its own parts: 4 lines of "--"
    assert data.count(b"\n--") == bounces.MAX_PARTS
    assert len(bounces.parse(data)) == bounces.MAX_RECIPIENTS


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (reports.dsn("a@example.com").replace(b"Status: 5.1.1", b"Status: bogus"), "hard"),  # the Diagnostic-Code's
        (reports.dsn("a@example.com").replace(b"Action: failed", b"X-Action: failed"), "hard"),  # a 5.x.x Status
        (reports.dsn("a@example.com").replace(b"--BOUNDARY--", b""), "hard"),  # cut short
        (
            reports.dsn("a@example.com").replace(
                b"Action: failed", b"Action: failed (Bad destination mailbox address)"
            ),
            "hard",
        ),
        (reports.dsn("a@example.com").replace(b"\r\n\r\nFinal-Recipient", b"\r\nFinal-Recipient"), "hard"),  # AOL's
        (
            reports.dsn("a@example.com").replace(b"Action: failed", b"Action: expired").replace(b"5.1.1", b"4.4.7"),
            "soft",
        ),
        (reports.dsn("a@example.com").replace(b"message/delivery-status", b"text/plain"), "hard"),  # fields as text
        (
            b"From: MAILER-DAEMON@relay.test\r\nSubject: Delivery Status Notification\r\n\r\nSee the attachment.\r\n",
            "unclassified",
        ),  # a mail system's notice that says nothing
    ],
)
def test_a_report_as_servers_really_write_it_is_read(data: bytes, kind: str) -> None:
    assert [r.kind for r in bounces.parse(data)] == [kind]


def test_a_complaint_report_without_its_feedback_fields_is_no_complaint() -> None:
    assert bounces.parse(reports.arf().replace(b"message/feedback-report", b"text/plain")) == ()


@pytest.mark.parametrize(
    "data",
    [
        b"Content-Type: multipart/report; report-type=delivery-status\r\n\r\nno boundary at all\r\n",
        b"Content-Type: multipart/report; boundary=b\r\n\r\nno part begins\r\n",
    ],
)
def test_a_message_that_cannot_be_read_at_all_is_malformed(data: bytes) -> None:
    with pytest.raises(bounces.Malformed):
        bounces.parse(data)


def _outcome(data: bytes) -> None:
    try:
        found = bounces.parse(data)
    except bounces.Malformed as exc:
        assert str(exc)
        return
    assert all(report.kind in ("hard", "soft", "complaint", "unclassified") for report in found)
    assert all(report.event_id.startswith(("dsn:", "arf:")) and len(report.event_id) < 700 for report in found)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000))
def test_garbage_bytes_never_crash_the_parser(data: bytes) -> None:
    _outcome(data)


_PIECES = [
    b"\r\n",
    b"\n",
    b"--BOUNDARY",
    b"--BOUNDARY--",
    b"Content-Type: ",
    b"message/delivery-status",
    b"message/rfc822",
    b"text/rfc822-headers",
    b"multipart/report; report-type=delivery-status",
    b"boundary=",
    b"Action: failed",
    b"Status: 5.1.1",
    b"Final-Recipient: rfc822;",
    b"=?utf-8?b?",
    b"\xff",
    b"\x00",
    b";",
    b'"',
    b"Message-ID: <campaign.1.2@x>",
    b"Content-Transfer-Encoding: base64",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([reports.dsn("a@example.com", original_id="<campaign.1.2@x>"), reports.arf()]),
    st.lists(
        st.tuples(
            st.integers(0, 2500), st.integers(0, 40), st.one_of(st.sampled_from(_PIECES), st.binary(max_size=20))
        ),
        max_size=8,
    ),
)
def test_mangled_reports_never_crash_the_parser(base: bytes, edits: list[tuple[int, int, bytes]]) -> None:
    data = base
    for at, cut, piece in edits:
        at = at % (len(data) + 1)
        data = data[:at] + piece + data[at + cut :]
    _outcome(data)
