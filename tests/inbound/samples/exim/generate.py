"""Write the bounces a real Exim sends back for each failure we can provoke on loopback.

    python -m tests.inbound.samples.exim.generate   # as root, with Debian's exim4-daemon-light installed

(Debian's MTAs conflict: installing exim4-daemon-light removes Postfix, which the Postfix set's
generator needs; reinstall whichever the machine had afterwards.)

A private Exim (its own configuration and spool under a temporary directory, no daemon: each message
is taken with ``exim4 -C <config> -odi`` and delivered at once) relays one message per case below,
with einmal's VERP return path (bounces+<token>@einmal.test) as envelope sender, to an aiosmtpd
server of ours (fail.test) that answers MAIL FROM, RCPT or the end of DATA as the case says; a few
cases fail inside Exim itself (an unknown local user, a local mailbox over its quota). Exim's bounces
go back to another aiosmtpd server of ours, which writes each to this directory as <case>.eml.

The replies are what real servers answered einmal (issue #32) or what their documentation gives;
Exim writes the bounce around them. The configuration has no retry rules, so a temporary failure
is returned at once (Exim: "no retry rule: temporary errors are permanent") as a deferral would be
after its retry time.

expected.json is written from CASES (class, recipients, reason), not from what einmal reads; the
tests do not need Exim.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from aiosmtpd.controller import Controller

from service.mail.verp import ReturnPath

HERE = Path(__file__).resolve().parent
SECRET = "einmal-samples"
EXIM = shutil.which("exim4") or "/usr/sbin/exim4"


class Case:
    def __init__(
        self,
        recipient: str,
        kind: str,
        reason: str | None,
        *,
        mail: str | None = None,
        rcpt: str | None = None,
        data: str | None = None,
    ) -> None:
        self.recipient, self.kind, self.reason = recipient, kind, reason
        self.mail, self.rcpt, self.data = mail, rcpt, data  # the remote's replies; None: 250


CASES = {
    # refused at MAIL FROM: about our return path, never the recipient
    "mail_from_sender_rejected": Case(
        "someone@fail.test", "hard", "sender", mail="501 5.1.8 {sender}: Sender address rejected: Domain not found"
    ),
    "mail_from_sender_invalid": Case(
        "someone@fail.test", "hard", "sender", mail="553 5.1.7 The sender address is not a valid address"
    ),
    "mail_from_refused_plain": Case(
        "someone@fail.test", "hard", "sender", mail="550 Verification failed for {sender}: no such user"
    ),
    # refused at RCPT, but naming our return path
    "rcpt_sender_rejected": Case("someone@fail.test", "hard", "sender", rcpt="550 5.1.0 {sender} sender rejected"),
    # refused at RCPT, about the recipient
    "rcpt_unknown": Case(
        "unknown@fail.test",
        "hard",
        "no_mailbox",
        rcpt="550 5.1.1 {recipient}: Recipient address rejected: User unknown in virtual mailbox table",
    ),
    "rcpt_disabled": Case(
        "disabled@fail.test",
        "hard",
        "disabled",
        rcpt="550 5.2.1 The email account that you tried to reach is disabled.",
    ),
    "rcpt_unknown_domain": Case(
        "someone@gone.fail.test",
        "hard",
        "no_domain",
        rcpt="550 5.1.2 {recipient}: Recipient address rejected: Domain not found",
    ),
    # a block, a quota, a rate: the server's own words, whatever the generic code before them
    "rcpt_blacklisted": Case(
        "blocked@fail.test", "hard", "policy", rcpt="550 5.7.1 IP address blacklisted by recipient"
    ),
    "rcpt_over_quota": Case("full@fail.test", "hard", "mailbox_full", rcpt="552 5.2.2 Over quota"),
    "rcpt_quota_as_unknown": Case(
        "full2@fail.test", "hard", "mailbox_full", rcpt="550 5.1.1 {recipient}: mailbox over quota"
    ),
    "rcpt_rate": Case(
        "busy@fail.test",
        "hard",
        "policy",
        rcpt="550-5.2.1 The user you are trying to contact is receiving mail at a rate that\n"
        "550-5.2.1 prevents additional messages from being delivered. Please resend your\n"
        "550 5.2.1 message at a later point.",
    ),
    "rcpt_hourly_limit": Case(
        "limit@fail.test", "hard", "policy", rcpt="550 5.1.1 {sender} has sent to too many recipients this hour"
    ),
    # temporary failures, returned by Exim as it gives up (expired, as the Postfix set's remote_later): never a
    # dead address
    "rcpt_dns_try_again": Case(
        "dns@fail.test",
        "soft",
        "expired",
        rcpt="450 4.1.2 {recipient}: Recipient address rejected: Name service error for "
        "domain fail.test: Host not found, try again",
    ),
    "rcpt_dns_malformed": Case(
        "dns2@fail.test",
        "soft",
        "expired",
        rcpt="450 4.1.2 {recipient}: Recipient address rejected: Domain not found. Name "
        "service error for name=fail.test type=MX: Malformed or unexpected name "
        "server reply",
    ),
    "rcpt_full_later": Case(
        "full3@fail.test", "soft", "mailbox_full", rcpt="452 4.2.2 {recipient}: Mailbox full, try again later"
    ),
    "rcpt_greylisted": Case(
        "grey@fail.test", "soft", None, rcpt="451 4.7.1 Greylisted, please try again in 300 seconds"
    ),
    # refused at the end of DATA
    "data_spam": Case(
        "spam@fail.test", "hard", "policy", data="550 5.7.1 Message rejected as spam by Content Filtering"
    ),
    "data_too_large": Case(
        "large@fail.test", "hard", "content", data="552 5.3.4 Message size exceeds fixed maximum message size"
    ),
    # failures inside Exim
    "local_unknown_user": Case("nobody-here@local.test", "hard", None),
    "local_over_quota": Case("small@local.test", "soft", "mailbox_full"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Remote:
    """fail.test: each case's replies, found by the message's envelope sender (one VERP token per case)."""

    def __init__(self, by_sender: dict[str, str]) -> None:
        self.by_sender = by_sender

    def _case(self, envelope) -> tuple[Case, dict[str, str]]:
        sender = envelope.mail_from or ""
        case = CASES[self.by_sender.get(sender.lower(), "rcpt_unknown")]
        return case, {"sender": f"<{sender}>", "recipient": f"<{case.recipient}>"}

    async def handle_MAIL(self, server, session, envelope, address, options):
        envelope.mail_from = address
        case, names = self._case(envelope)
        return case.mail.format(**names).replace("\n", "\r\n") if case.mail else "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, options):
        case, names = self._case(envelope)
        if case.rcpt:
            return case.rcpt.format(**names).replace("\n", "\r\n")
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        case, names = self._case(envelope)
        return case.data.format(**names) if case.data else "250 OK"


class Capture:
    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes]] = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.rcpt_tos[0], envelope.original_content))
        return "250 OK"


def configure(root: Path, capture_port: int, remote_port: int) -> str:
    return f"""
primary_hostname = relay.einmal.test
qualify_domain = einmal.test
spool_directory = {root}/spool
log_file_path = {root}/log/%slog
exim_user = Debian-exim
exim_group = Debian-exim
never_users = root
domainlist local_domains = local.test
acl_not_smtp = acl_check
keep_environment =
bounce_return_size_limit = 10K
tls_advertise_hosts =

begin acl
acl_check:
  accept

begin routers
local_user:
  driver = accept
  domains = +local_domains
  local_parts = small
  transport = local_mailbox
fail_test:
  driver = manualroute
  domains = fail.test : gone.fail.test : einmal.test
  transport = remote_smtp
  route_list = * 127.0.0.1
  self = send

begin transports
remote_smtp:
  driver = smtp
  port = ${{if eq{{$domain}}{{einmal.test}}{{{capture_port}}}{{{remote_port}}}}}
  allow_localhost
  hosts_try_fastopen =
  hosts_avoid_tls = *
local_mailbox:
  driver = appendfile
  file = {root}/mail/small
  user = Debian-exim
  group = Debian-exim
  quota = 1K

begin retry

begin rewrite
"""


def message(case: str, recipient: str) -> bytes:
    body = "A line of the campaign's message.\n" * (100 if case == "local_over_quota" else 5)
    return (
        f"From: News <news@einmal.test>\nTo: <{recipient}>\nSubject: News for {case}\n"
        f"Message-ID: <campaign.9.{len(case)}@einmal.test>\nDate: Tue, 1 Dec 2026 02:00:00 +0000\n"
        f"MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n{body}"
    ).encode()


def run(root: Path) -> dict[str, bytes]:
    capture_port, remote_port = free_port(), free_port()
    path = ReturnPath("bounces@einmal.test", SECRET)
    senders = {path.address(9, n).lower(): case for n, case in enumerate(CASES, 1)}
    capture = Capture()
    controllers = [
        Controller(capture, hostname="127.0.0.1", port=capture_port),
        Controller(Remote(senders), hostname="127.0.0.1", port=remote_port),
    ]
    for controller in controllers:
        controller.start()
    for name in ("spool", "log", "mail"):
        (root / name).mkdir()
        shutil.chown(root / name, "Debian-exim", "Debian-exim")
    config = root / "exim.conf"
    config.write_text(configure(root, capture_port, remote_port))
    try:
        for sender, case in senders.items():
            recipient = CASES[case].recipient
            subprocess.run(
                [EXIM, "-C", str(config), "-odi", "-oi", "-f", sender, recipient],
                input=message(case, recipient),
                capture_output=True,
                timeout=60,
                check=False,
            )
        deadline = time.monotonic() + 60
        while len(capture.messages) < len(CASES) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        for controller in controllers:
            controller.stop()
    return {senders.get(to.lower(), to): data for to, data in capture.messages}


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="einmal-exim-"))
    os.chmod(root, 0o755)
    try:
        found = run(root)
        for case, data in sorted(found.items()):
            (HERE / f"{case}.eml").write_bytes(data)
        expected = {
            f"{case}.eml": {"class": c.kind, "recipients": [c.recipient], **({"reason": c.reason} if c.reason else {})}
            for case, c in CASES.items()
            if case in found
        }
        (HERE / "expected.json").write_text(
            "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(expected.items())) + "\n}\n"
        )
        missing = sorted(set(CASES) - set(found))
        print(f"wrote {len(found)} bounces" + (f"; none for {', '.join(missing)}" if missing else ""))
        if missing:
            for log in (root / "log").glob("*log"):
                print(log.read_text()[-3000:])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
