"""A real authoritative DNS server (Debian's `knotd`, Knot DNS) on a free loopback port, serving zones a test
writes; einmal's resolver is pointed at it with EINMAL_DNS_SERVERS=127.0.0.1:<port>.

    with dns_server(tmp_path, {"good.test": ['@ TXT "v=spf1 ip4:192.0.2.10 -all"', *txt("s1._domainkey", r)]}) as at:
        env = {"EINMAL_DNS_SERVERS": at}

Each zone gets its SOA and NS; knotd runs with its own configuration, database and pid file in the folder,
and is stopped (then killed, if it must be) at the end."""

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dns.exception
import dns.nameserver
import dns.resolver
import pytest

START_SECONDS = 10.0


def txt(name: str, value: str) -> str:
    """A TXT record line, its value cut into the strings of at most 255 bytes DNS holds (a 2048-bit key)."""
    chunks = " ".join(f'"{value[i : i + 250]}"' for i in range(0, len(value), 250))
    return f"{name} TXT {chunks}"


def _free_port() -> int:
    """A loopback port free for both UDP and TCP."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, socket.socket() as tcp:
            udp.bind(("127.0.0.1", 0))
            port = udp.getsockname()[1]
            try:
                tcp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free loopback port for UDP and TCP in 50 tries")


def _binary() -> str:
    found = shutil.which("knotd") or ("/usr/sbin/knotd" if os.path.exists("/usr/sbin/knotd") else None)
    if found is None:
        if os.environ.get("CI"):
            raise AssertionError("knotd is not installed (apt-get install knot)")
        pytest.skip("knotd is not installed (apt-get install knot)")
    return found


@contextmanager
def dns_server(folder: Path, zones: dict[str, list[str]]) -> Iterator[str]:
    """knotd serving `zones` (apex -> record lines relative to it); yields `127.0.0.1:<port>`."""
    binary, port = _binary(), _free_port()
    folder = folder / "knot"
    folder.mkdir(parents=True)
    for apex, records in zones.items():
        head = [f"$ORIGIN {apex}.", "$TTL 60", f"@ SOA ns.{apex}. hostmaster.{apex}. 1 60 60 600 60", "@ NS ns"]
        (folder / f"{apex}.zone").write_text("\n".join([*head, *records]) + "\n")
    config = folder / "knot.conf"
    config.write_text(
        "\n".join(
            [
                "server:",
                f'    rundir: "{folder}"',
                f'    pidfile: "{folder / "knot.pid"}"',
                f"    listen: 127.0.0.1@{port}",
                "database:",
                f'    storage: "{folder}"',
                "log:",
                "  - target: stderr",
                "    any: warning",
                "template:",
                "  - id: default",
                f'    storage: "{folder}"',
                '    file: "%s.zone"',
                "    journal-content: none",
                "    zonefile-sync: -1",
                "zone:",
                *(f"  - domain: {apex}" for apex in zones),
            ]
        )
        + "\n"
    )
    log = open(folder / "knotd.log", "w")
    process = subprocess.Popen([binary, "-c", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait(process, port, next(iter(zones)), folder)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()


def _wait(process: subprocess.Popen, port: int, apex: str, folder: Path) -> None:
    """Until knotd answers for `apex`, at most START_SECONDS."""
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = [dns.nameserver.Do53Nameserver("127.0.0.1", port)]
    resolver.lifetime = 0.5
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"knotd exited {process.returncode}: {(folder / 'knotd.log').read_text()[-2000:]}")
        try:
            resolver.resolve(apex, "SOA")
            return
        except dns.exception.DNSException:
            time.sleep(0.05)
    raise AssertionError(f"knotd did not answer within {START_SECONDS} s: {(folder / 'knotd.log').read_text()[-2000:]}")
