"""Write the bounces a real Postfix sends back for each failure we can provoke on loopback.

    python -m tests.inbound.samples.postfix.generate   # as root, with postfix installed (apt-get install postfix)
    python -m tests.inbound.samples.postfix.generate --delayed   # the delay warning alone

A private Postfix instance (its own config, queue and data directories under a temporary one,
SMTP on 127.0.0.1 only) takes one message for each recipient below, with einmal's VERP return path
(bounces+<token>@einmal.test) as envelope sender. Its bounces go back to an aiosmtpd server of
ours, which writes each to this directory as <case>.eml. The failures:

- an unknown local user (Postfix's local delivery agent); an unknown domain (DNS); an alias
  forwarding to an unknown user (Original-Recipient is not Final-Recipient); two recipients in
  one report; a delivery asked to be reported (NOTIFY=SUCCESS: not a bounce);
- through a transport to another aiosmtpd server of ours (fail.test), which answers RCPT
  with 550 5.1.1, 550 5.2.1, 552 5.2.2, 550 5.7.1 (policy), 550 5.7.26 (DMARC), or the end of
  DATA with 552 5.3.4 (too large), or 451 4.3.0 (expired: maximal_queue_lifetime = 0, so one
  deferral returns the message);
- through a transport to a third server of ours (sender.test), which refuses our return path at
  MAIL FROM with 553 5.1.8: a bounce about us, not the recipient.

expected.json is written by hand from what each case provokes; the tests do not need Postfix.
"""

import os
import shutil
import smtplib
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiosmtpd.controller import Controller

from service.mail.verp import ReturnPath

HERE = Path(__file__).resolve().parent
SECRET = "einmal-samples"
REMOTE = {  # local part at fail.test -> (RCPT reply, end-of-DATA reply)
    "unknown": (
        "550 5.1.1 <unknown@fail.test>: Recipient address rejected: User unknown in virtual mailbox table",
        None,
    ),
    "disabled": ("550 5.2.1 The email account that you tried to reach is disabled.", None),
    "full": ("552 5.2.2 <full@fail.test>: Recipient address rejected: Mailbox full, quota exceeded", None),
    "policy": ("550 5.7.1 Service unavailable, Client host [127.0.0.1] blocked using Spamhaus", None),
    "dmarc": (
        "550 5.7.26 This mail has been blocked because the sender is unauthenticated. DMARC policy of the "
        "sender domain requires that mail be authenticated",
        None,
    ),
    "large": ("250 2.1.5 OK", "552 5.3.4 Message size exceeds fixed maximum message size"),
    "later": ("451 4.3.0 <later@fail.test>: Temporary lookup failure, try again later", None),
}
CASES = {  # case name -> recipients (a DSN of success asked for with NOTIFY=SUCCESS)
    "unknown_local_user": ["nobody-here@local.test"],
    "unknown_domain": ["someone@nosuch-domain.invalid"],
    **{f"remote_{name}": [f"{name}@fail.test"] for name in REMOTE},
    "forwarded_unknown": ["forward@local.test"],  # an alias of unknown@fail.test: Original- and Final-Recipient
    "two_recipients": ["unknown@fail.test", "full@fail.test"],
    "delivered_notify_success": ["good@fail.test"],
    "remote_sender_refused": ["someone@sender.test"],  # sender.test refuses our return path at MAIL FROM
}
SENDER_REFUSED = "553 5.1.8 <{sender}>: Sender address rejected: Domain not found"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Remote:
    async def handle_RCPT(self, server, session, envelope, address, options):
        reply = REMOTE.get(address.partition("@")[0], ("250 OK", None))[0]
        if reply.startswith("250"):
            envelope.rcpt_tos.append(address)
        return reply

    async def handle_DATA(self, server, session, envelope):
        return REMOTE.get(envelope.rcpt_tos[0].partition("@")[0], (None, None))[1] or "250 OK"


class RefusesSender:
    async def handle_MAIL(self, server, session, envelope, address, options):
        return SENDER_REFUSED.format(sender=address)


class Capture:
    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes]] = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.rcpt_tos[0], envelope.original_content))
        return "250 OK"


# --delayed: a second instance that keeps a deferred message and warns of it (delay_warning_time) before any
# bounce; only its warning is written, as remote_later_delayed.eml
DELAYED_CASES = {"remote_later_delayed": ["later@fail.test"]}
DELAYED = """
maximal_queue_lifetime = 1h
bounce_queue_lifetime = 1h
delay_warning_time = 2s
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
"""


def main_cf(root: Path, smtpd_port: int, capture_port: int, remote_port: int, sender_port: int, delayed: bool) -> str:
    lifetimes = DELAYED if delayed else "maximal_queue_lifetime = 0\nbounce_queue_lifetime = 0\n"
    return f"""
compatibility_level = 3.6
queue_directory = {root}/queue
data_directory = {root}/data
command_directory = /usr/sbin
daemon_directory = /usr/lib/postfix/sbin
mail_owner = postfix
setgid_group = postdrop
myhostname = relay.einmal.test
mydomain = einmal.test
myorigin = $myhostname
mydestination = local.test
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
local_recipient_maps =
virtual_alias_maps = inline:{{ forward@local.test=unknown@fail.test }}
alias_maps =
alias_database =
transport_maps = inline:{{ einmal.test=smtp:[127.0.0.1]:{capture_port}, fail.test=smtp:[127.0.0.1]:{remote_port},
    sender.test=smtp:[127.0.0.1]:{sender_port} }}
{lifetimes}
smtp_tls_security_level = none
smtpd_tls_security_level = none
maillog_file_prefixes = {root}
maillog_file = {root}/maillog
biff = no
"""


def master_cf(smtpd_port: int) -> str:
    services = """
127.0.0.1:{port} inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
local     unix  -       n       n       -       -       local
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"""
    return services.replace("{port}", str(smtpd_port))


def message(case: str, recipient: str) -> bytes:
    body = "A line of the campaign's message.\n" * (2000 if case == "remote_large" else 5)
    return (
        f"From: News <news@einmal.test>\nTo: <{recipient}>\nSubject: News for {case}\n"
        f"Message-ID: <campaign.7.{len(case)}@einmal.test>\nDate: Tue, 1 Dec 2026 02:00:00 +0000\n"
        f"MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n{body}"
    ).encode()


def run(root: Path, cases: dict[str, list[str]], delayed: bool) -> dict[str, bytes]:
    smtpd_port, capture_port, remote_port, sender_port = free_port(), free_port(), free_port(), free_port()
    capture = Capture()
    controllers = [
        Controller(capture, hostname="127.0.0.1", port=capture_port),
        Controller(Remote(), hostname="127.0.0.1", port=remote_port),
        Controller(RefusesSender(), hostname="127.0.0.1", port=sender_port),
    ]
    for controller in controllers:
        controller.start()
    config = root / "config"
    config.mkdir()
    (root / "queue").mkdir()
    (root / "data").mkdir()
    shutil.chown(root / "data", "postfix")
    (config / "main.cf").write_text(main_cf(root, smtpd_port, capture_port, remote_port, sender_port, delayed))
    (config / "master.cf").write_text(master_cf(smtpd_port))
    started = subprocess.run(["postfix", "-c", str(config), "start"], capture_output=True, text=True)
    if started.returncode:
        log = (root / "maillog").read_text()[-2000:] if (root / "maillog").exists() else ""
        raise SystemExit(f"postfix did not start: {started.stderr.strip()}\n{log}")
    path = ReturnPath("bounces@einmal.test", SECRET)
    senders = {}
    try:
        time.sleep(1)
        for n, (case, recipients) in enumerate(cases.items(), 1):
            senders[path.address(7, n)] = case
            options = ["NOTIFY=SUCCESS"] if case.startswith("delivered") else []
            with smtplib.SMTP("127.0.0.1", smtpd_port, timeout=30) as client:
                client.ehlo()
                client.sendmail(path.address(7, n), recipients, message(case, recipients[0]), rcpt_options=options)
        deadline = time.monotonic() + 120
        while len(capture.messages) < len(cases) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        subprocess.run(["postfix", "-c", str(config), "stop"], check=False)
        for controller in controllers:
            controller.stop()
    return {senders.get(to, to): data for to, data in capture.messages}


def main() -> None:
    delayed = "--delayed" in sys.argv[1:]
    cases = DELAYED_CASES if delayed else CASES
    root = Path(tempfile.mkdtemp(prefix="einmal-postfix-"))
    os.chmod(root, 0o755)
    try:
        found = run(root, cases, delayed)
        for case, data in sorted(found.items()):
            (HERE / f"{case}.eml").write_bytes(data)
        missing = sorted(set(cases) - set(found))
        print(f"wrote {len(found)} bounces" + (f"; none for {', '.join(missing)}" if missing else ""))
        if missing and (root / "maillog").exists():
            print((root / "maillog").read_text()[-3000:])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
