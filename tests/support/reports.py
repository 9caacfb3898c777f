"""Bounce and complaint reports as mail systems send them back (RFC 3464 DSNs, RFC 5965 ARF)."""


def dsn(
    recipient: str,
    *,
    action: str = "failed",
    status: str = "5.1.1",
    report_id: str | None = "<r1@relay.test>",
    original_id: str | None = None,
) -> bytes:
    return dsn_of([(recipient, action, status)], report_id=report_id, original_id=original_id)


def dsn_of(
    blocks: list[tuple[str, str, str]],
    *,
    report_id: str | None = "<r1@relay.test>",
    original_id: str | None = None,
    extra_parts: int = 0,
    returned_body: str = "",
) -> bytes:
    """A DSN with one per-recipient block for each (recipient, action, status); `extra_parts` more
    text/plain parts before its status, and `returned_body` after the returned headers."""
    own = f"Message-ID: {report_id}\n" if report_id else ""
    returned = f"Message-ID: {original_id}\n" if original_id else ""
    per_recipient = "\n".join(
        f"""Final-Recipient: rfc822; {recipient}
Original-Recipient: rfc822;{recipient}
Action: {action}
Status: {status}
Diagnostic-Code: smtp; 550 5.1.1 <{recipient}>: Recipient address rejected
"""
        for recipient, action, status in blocks
    )
    recipient = blocks[0][0]
    extra = "".join(f"--BOUNDARY\nContent-Type: text/plain\n\npart {n}\n\n" for n in range(extra_parts))
    return f"""From: MAILER-DAEMON@relay.test
To: bounces@example.org
Subject: Undelivered Mail Returned to Sender
{own}MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="BOUNDARY"

--BOUNDARY
Content-Type: text/plain

This is the mail system at host relay.test. Your message could not be delivered.

{extra}--BOUNDARY
Content-Type: message/delivery-status

Reporting-MTA: dns; relay.test
Arrival-Date: Tue, 1 Dec 2026 02:00:00 +0000

{per_recipient}
--BOUNDARY
Content-Type: text/rfc822-headers

From: news@example.com
To: {recipient}
Subject: Hi
{returned}
{returned_body}
--BOUNDARY--
""".replace("\n", "\r\n").encode()


def arf(
    *,
    feedback: str = "abuse",
    report_id: str | None = "<arf1@isp.test>",
    original_id: str | None = None,
    mail_from: str = "bounces@example.org",
    return_path: str | None = None,
) -> bytes:
    """An ARF report; `mail_from` is its Original-Mail-From, `return_path` the returned message's Return-Path."""
    own = f"Message-ID: {report_id}\n" if report_id else ""
    returned = f"Message-ID: {original_id}\n" if original_id else ""
    returned += f"Return-Path: <{return_path}>\n" if return_path else ""
    return f"""From: <abuse@isp.test>
Date: Tue, 1 Dec 2026 02:00:00 +0000
Subject: FW: Hi
To: <bounces@example.org>
{own}MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report; boundary="part1"

--part1
Content-Type: text/plain; charset="US-ASCII"

This is an email abuse report for an email message received from IP 127.0.0.1.

--part1
Content-Type: message/feedback-report

Feedback-Type: {feedback}
User-Agent: SomeGenerator/1.0
Version: 1
Original-Mail-From: <{mail_from}>
Arrival-Date: Tue, 1 Dec 2026 01:59:00 +0000
Source-IP: 127.0.0.1

--part1
Content-Type: message/rfc822
Content-Disposition: inline

From: news@example.com
To: <redacted@isp.test>
Subject: Hi
{returned}
Hello.
--part1--
""".replace("\n", "\r\n").encode()


def auto_reply() -> bytes:
    return (
        b"From: someone@example.com\r\nTo: bounces@example.org\r\nSubject: Out of office\r\n"
        b"Message-ID: <ooo1@example.com>\r\nAuto-Submitted: auto-replied\r\n\r\nI am away until Monday.\r\n"
    )
