"""The cost of DKIM signing: one node sending the same campaign signed with Ed25519 and with
RSA-2048, next to the unsigned run of the same bench."""

import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from bench import send
from bench.sink import Sink

KEYS = {"ed25519": lambda: ed25519.Ed25519PrivateKey.generate(),
        "rsa-2048": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)}


def key_env(folder: Path, kind: str) -> dict[str, str]:
    path = folder / f"{kind}.pem"
    path.write_bytes(KEYS[kind]().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    return {"EINMAL_DKIM_DOMAIN": "example.com", "EINMAL_DKIM_SELECTOR": "bench",
            "EINMAL_DKIM_PRIVATE_KEY_FILE": str(path)}


async def runs(server: str, sink: Sink, *, messages: int, tick: float, say=print) -> dict[str, send.Run]:
    """One node, signed with each kind of key."""
    done = {}
    with tempfile.TemporaryDirectory(prefix="einmal-bench-dkim-") as folder:
        for kind in KEYS:
            say(f"einmal: 1 node, {messages:,} recipients, DKIM {kind}")
            done[kind] = await send.campaign(server, sink, nodes=1, messages=messages, tick=tick,
                                             timeout=max(120.0, messages / 60), say=say,
                                             extra_env=key_env(Path(folder), kind), label=kind.replace("-", ""))
            say(f"  {send_line(done[kind])}")
    return done


def send_line(run: send.Run) -> str:
    from bench.report import run_line

    return run_line(run)
