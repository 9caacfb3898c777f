"""DKIM signatures (RFC 6376), relaxed/relaxed, rsa-sha256 or ed25519-sha256 (RFC 8463).

    signer = dkim.signer(settings)         # None when the DKIM variables are unset; cached per key file
    header, body_hash = signer.sign(message, body_hash=None, now=time.time())
    signed = header + message

``sign`` takes a rendered message (CRLF line endings, not dot-stuffed) and returns the
``DKIM-Signature:`` header line to put in front of it, and the body hash it used. A
campaign whose body has no merge field passes that body hash back in for every further
message: only the headers are then canonicalised and hashed per message.

Every header field of the message is signed, in order. The key is read once per process
(`einmal run` reads it at start-up: a missing, unreadable or unsupported key is one line
and exit 2). The public key for DNS: ``public_record(key)`` (``v=DKIM1; k=…; p=…``).
"""

import base64
import functools
import hashlib
import re
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa

from service.errors import ConfigError
from service.settings import Settings

CRLF = b"\r\n"
_WSP_RUN = re.compile(rb"[ \t]+")
_TRAILING_WSP = re.compile(rb"[ \t]+\r\n")
_FOLD_AT = 78
MIN_RSA_BITS = 1024

PrivateKey = rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey


def relaxed_body(body: bytes) -> bytes:
    """RFC 6376 3.4.4: runs of WSP become one SP, none at a line's end, no empty lines at the end."""
    if body and not body.endswith(CRLF):
        body += CRLF
    if b"\t" in body or b"  " in body or b" \r\n" in body:  # quoted-printable rarely has any
        body = _TRAILING_WSP.sub(CRLF, _WSP_RUN.sub(b" ", body))
    while body.endswith(b"\r\n\r\n"):
        body = body.rstrip(b"\r\n") + CRLF
    return b"" if body == CRLF else body


def relaxed_headers(head: bytes) -> list[tuple[bytes, bytes]]:
    """(lower-case name, canonical field with CRLF) for each field of a header block (RFC 6376 3.4.2)."""
    fields: list[tuple[bytes, bytes]] = []
    for line in head.split(CRLF):
        if line[:1] in (b" ", b"\t") and fields:  # a continuation: unfolded into the field before
            name, canonical = fields[-1]
            value = (canonical[len(name) + 1:-2] + b" " + line).strip(b" \t")
            fields[-1] = (name, name + b":" + _WSP_RUN.sub(b" ", value) + CRLF)
            continue
        name, _, value = line.partition(b":")
        name = name.rstrip(b" \t").lower()
        fields.append((name, name + b":" + _WSP_RUN.sub(b" ", value).strip(b" ") + CRLF))
    return fields


def _fold(tags: list[bytes]) -> bytes:
    """``DKIM-Signature: tag; tag; …`` folded between tags (relaxed canonicalisation undoes it)."""
    lines, line = [], b"DKIM-Signature:"
    for tag in tags:
        if len(line) + 1 + len(tag) > _FOLD_AT and line != b"DKIM-Signature:":
            lines.append(line)
            line = b""
        line += b" " + tag
    lines.append(line)
    return b"\r\n".join(lines)


class Signer:
    __slots__ = ("_algorithm", "_key", "_prefix", "_rsa", "domain", "selector")

    def __init__(self, domain: str, selector: str, key: PrivateKey):
        self.domain, self.selector, self._key = domain, selector, key
        self._rsa = isinstance(key, rsa.RSAPrivateKey)
        self._algorithm = b"rsa-sha256" if self._rsa else b"ed25519-sha256"
        self._prefix: dict[tuple[bytes, ...], list[bytes]] = {}  # the tags up to h=, per list of names

    def body_hash(self, body: bytes) -> bytes:
        return base64.b64encode(hashlib.sha256(relaxed_body(body)).digest())

    def sign(self, message: bytes, body_hash: bytes | None = None, now: float = 0.0) -> tuple[bytes, bytes]:
        """The DKIM-Signature header line (with CRLF) for ``message``, and the body hash used."""
        end = message.find(b"\r\n\r\n")
        head, body = (message, b"") if end < 0 else (message[:end], message[end + 4:])
        if body_hash is None:
            body_hash = self.body_hash(body)
        fields = relaxed_headers(head)
        names = tuple(name for name, _ in fields)
        tags = self._prefix.get(names)
        if tags is None:
            if len(self._prefix) > 64:
                self._prefix.clear()
            tags = self._prefix[names] = [
                b"v=1;", b"a=" + self._algorithm + b";", b"c=relaxed/relaxed;", b"d=" + self.domain.encode() + b";",
                b"s=" + self.selector.encode() + b";", b"h=" + b":".join(names) + b";"]
        header = _fold([*tags, b"t=%d;" % int(now), b"bh=" + body_hash + b";", b"b="])
        data = b"".join(canonical for _, canonical in fields)
        data += relaxed_headers(header)[0][1][:-2]  # its own field, b= empty, without the CRLF
        if self._rsa:
            signature = self._key.sign(data, padding.PKCS1v15(), hashes.SHA256())
        else:
            signature = self._key.sign(hashlib.sha256(data).digest())  # RFC 8463: Ed25519 over the hash
        encoded = base64.b64encode(signature)
        wrapped = [encoded[i:i + 72] for i in range(0, len(encoded), 72)]
        return header + b"\r\n ".join(wrapped) + CRLF, body_hash


def load_key(path: str) -> PrivateKey:
    """A PEM RSA or Ed25519 private key, or dkimpy's base64 Ed25519 seed; ConfigError saying why not."""
    where = f"EINMAL_DKIM_PRIVATE_KEY_FILE: {path}"
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it: {(exc.strerror or str(exc)).lower()}") from None
    stripped = data.strip()
    if not stripped.startswith(b"-----"):
        try:
            seed = base64.b64decode(stripped, validate=True)
        except ValueError:
            seed = b""
        if len(seed) == 32:
            return ed25519.Ed25519PrivateKey.from_private_bytes(seed)
        raise ConfigError(f"{where}: not a PEM private key (nor a base64 Ed25519 seed)")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise ConfigError(f"{where}: the key is encrypted; give an unencrypted one") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError(f"{where}: not a readable PEM private key") from None
    if isinstance(key, rsa.RSAPrivateKey):
        if key.key_size < MIN_RSA_BITS:
            raise ConfigError(f"{where}: an RSA key of {key.key_size} bits; at least {MIN_RSA_BITS} (2048 advised)")
        return key
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key
    raise ConfigError(f"{where}: a {type(key).__name__.removesuffix('PrivateKey')} key; DKIM signs with RSA "
                      "or Ed25519")


@functools.cache
def _signer(domain: str, selector: str, path: str) -> Signer:
    return Signer(domain, selector, load_key(path))


def signer(settings: Settings) -> Signer | None:
    """The signer the DKIM variables describe, or None when unset; the key file is read once per process."""
    if settings.dkim_private_key_file is None:
        return None
    return _signer(settings.dkim_domain, settings.dkim_selector, settings.dkim_private_key_file)


def public_record(key: PrivateKey) -> bytes:
    """The DNS TXT record of the key's public half: ``v=DKIM1; k=rsa|ed25519; p=…``."""
    public = key.public_key()
    if isinstance(public, ed25519.Ed25519PublicKey):
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return b"v=DKIM1; k=ed25519; p=" + base64.b64encode(raw)
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return b"v=DKIM1; k=rsa; p=" + base64.b64encode(der)
