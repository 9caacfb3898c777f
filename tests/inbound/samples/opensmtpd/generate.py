"""Write the bounces a real OpenSMTPD sends back for each failure we can provoke on loopback.

    python -m tests.inbound.samples.opensmtpd.generate [SMTPD]   # as root, Linux

SMTPD is OpenSMTPD's smtpd binary (default: Debian's, extracted without installing it, since Debian's
MTAs conflict: ``apt-get download opensmtpd && dpkg -x opensmtpd_*.deb /tmp/opensmtpd`` gives
/tmp/opensmtpd/usr/sbin/smtpd; its libraries are libevent, libdb, libssl, libcrypt, libpam, zlib). It
runs in a private mount namespace (``unshare -m``) with tmpfs over /var/spool, /var/lib and /run, so
its compiled-in spool, chroot and control socket are its own; it needs the users ``opensmtpd`` and
``opensmtpq`` (Debian's package creates them), listens on 127.0.0.1 only, and is stopped at the end.

It takes one message per case below, with einmal's VERP return path (bounces+<token>@einmal.test) as
envelope sender, and relays it to an aiosmtpd server of ours (fail.test) that answers MAIL FROM, RCPT
or the end of DATA with the reply of the Exim set's case of the same name
(tests/inbound/samples/exim/generate.py: what real servers answered einmal). A recipient at
nosuch-domain.invalid is relayed by its MX, which DNS says does not exist. OpenSMTPD's notices go back to
another aiosmtpd server of ours, which writes each to this directory: <case>.eml for the bounce, and
<case>_delayed.eml for the warning a temporary failure gets first (``bounce warn-interval``), <case>.eml for
the notice sent when the message expires (``queue ttl``).

expected.json is written from CASES (class, recipients, reason), not from what einmal reads; the tests do
not need OpenSMTPD.
"""

import json
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
from tests.inbound.samples.exim import generate as exim

HERE = Path(__file__).resolve().parent
SECRET = "einmal-samples"
SMTPD = "/tmp/opensmtpd/usr/sbin/smtpd"
TTL, WARN = 45, 15  # seconds: a temporary failure is warned of after WARN, returned after TTL

Case = exim.Case
CASES = {name: case for name, case in exim.CASES.items() if not name.startswith("local_")}
CASES["unknown_domain"] = Case("someone@nosuch-domain.invalid", "hard", "no_domain")
# a temporary failure is first a warning naming the server's reply (soft, for the reason that reply gives), then,
# when the queue's lifetime ends, OpenSMTPD 6.8's "Envelope expired", still sent as a delay (Action: delayed,
# Status: 4.4.7; soft, expired)
TEMPORARY = {
    "rcpt_dns_try_again": "routing",
    "rcpt_dns_malformed": "routing",
    "rcpt_full_later": "mailbox_full",
    "rcpt_greylisted": None,
}


class Remote(exim.Remote):
    def _case(self, envelope) -> tuple[Case, dict[str, str]]:
        sender = envelope.mail_from or ""
        case = CASES[self.by_sender.get(sender.lower(), "rcpt_unknown")]
        return case, {"sender": f"<{sender}>", "recipient": f"<{case.recipient}>"}


def configure(listen_port: int, capture_port: int, remote_port: int) -> str:
    return f"""
queue ttl {TTL}s
bounce warn-interval {WARN}s
listen on 127.0.0.1 port {listen_port} hostname relay.einmal.test
action "capture" relay host smtp://127.0.0.1:{capture_port} helo relay.einmal.test
action "remote" relay host smtp://127.0.0.1:{remote_port} helo relay.einmal.test
action "mx" relay helo relay.einmal.test
match from any for domain "einmal.test" action "capture"
match from any for domain "fail.test" action "remote"
match from any for domain "gone.fail.test" action "remote"
match from any for domain "nosuch-domain.invalid" action "mx"
"""


def message(case: str, recipient: str) -> bytes:
    return (
        f"From: News <news@einmal.test>\nTo: <{recipient}>\nSubject: News for {case}\n"
        f"Message-ID: <campaign.11.{len(case)}@einmal.test>\nDate: Tue, 1 Dec 2026 02:00:00 +0000\n"
        f"MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n" + "A line of the campaign's message.\n" * 5
    ).encode()


def run(root: Path, smtpd: str) -> dict[str, bytes]:
    listen_port, capture_port, remote_port = exim.free_port(), exim.free_port(), exim.free_port()
    path = ReturnPath("bounces@einmal.test", SECRET)
    senders = {path.address(11, n).lower(): case for n, case in enumerate(CASES, 1)}
    capture = exim.Capture()
    controllers = [
        Controller(capture, hostname="127.0.0.1", port=capture_port),
        Controller(Remote(senders), hostname="127.0.0.1", port=remote_port),
    ]
    for controller in controllers:
        controller.start()
    config = root / "smtpd.conf"
    config.write_text(configure(listen_port, capture_port, remote_port))
    private = (
        "mount -t tmpfs none /var/spool && mount -t tmpfs none /var/lib && mount -t tmpfs none /run && "
        f"mkdir -p /var/lib/opensmtpd/empty && exec {smtpd} -d -f {config}"
    )
    log = (root / "smtpd.log").open("wb")
    daemon = subprocess.Popen(
        ["unshare", "-m", "sh", "-c", private], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", listen_port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or daemon.poll() is not None:
                    raise SystemExit(f"smtpd did not start:\n{(root / 'smtpd.log').read_text()[-2000:]}") from None
                time.sleep(0.2)
        for sender, case in senders.items():
            with smtplib.SMTP("127.0.0.1", listen_port, timeout=30) as client:
                client.sendmail(sender, [CASES[case].recipient], message(case, CASES[case].recipient))
        deadline = time.monotonic() + TTL + 120
        while len(capture.messages) < len(CASES) + len(TEMPORARY) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        os.killpg(daemon.pid, 15)
        daemon.wait(timeout=10)
        for controller in controllers:
            controller.stop()
    found: dict[str, bytes] = {}
    for to, data in capture.messages:  # in the order OpenSMTPD sent them: a temporary failure's warning first
        case = senders.get(to.lower(), to)
        found[f"{case}_delayed" if case in TEMPORARY and f"{case}_delayed" not in found else case] = data
    return found


def expectations(found: dict[str, bytes]) -> dict[str, dict]:
    out = {}
    for name in found:
        case = name.removesuffix("_delayed")
        c = CASES[case]
        reason = TEMPORARY[case] if name.endswith("_delayed") else "expired" if case in TEMPORARY else c.reason
        out[f"{name}.eml"] = {"class": c.kind, "recipients": [c.recipient], **({"reason": reason} if reason else {})}
    return out


def main() -> None:
    smtpd = sys.argv[1] if len(sys.argv) > 1 else SMTPD
    root = Path(tempfile.mkdtemp(prefix="einmal-opensmtpd-"))
    os.chmod(root, 0o755)
    try:
        found = run(root, smtpd)
        for name, data in sorted(found.items()):
            (HERE / f"{name}.eml").write_bytes(data)
        (HERE / "expected.json").write_text(
            "{\n"
            + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(expectations(found).items()))
            + "\n}\n"
        )
        missing = sorted(set(CASES) - {n.removesuffix("_delayed") for n in found})
        print(f"wrote {len(found)} notices" + (f"; none for {', '.join(missing)}" if missing else ""))
        if missing:
            print((root / "smtpd.log").read_text()[-4000:])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
