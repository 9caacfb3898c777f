"""DKIM signatures (RFC 6376), relaxed/relaxed, rsa-sha256 or ed25519-sha256 (RFC 8463).

    signer = dkim.signer(mailing)          # None when the DKIM variables are unset; keys cached per file
    campaign = signer.prepare(static_fields, static_pieces, static_body, names)   # once per campaign
    signed = campaign.sign(fields, body_parts, now=time.time()) + message          # per message

A campaign's messages differ in a few header fields (To, Subject, Date, Message-ID,
List-Unsubscribe) and in the body lines that hold a merge field; everything else is the
same for all of them. ``prepare`` canonicalises the same header fields once and keeps the
SHA-256 state after them (they come first in ``h=``: a verifier looks fields up by name, so
``h=`` need not follow the message's order), the canonical form of each body piece that is
the same for every message, and the DKIM-Signature field up to ``h=`` with its canonical
form (``names`` are the message's own fields, the same for every message). ``sign`` then
canonicalises only the message's own fields and body pieces, hashes the body (once per
campaign when it has no merge field), continues a copy of the header hash with the
message's fields and the DKIM-Signature field, and signs that digest: per message little
more than the signature itself. ``fields`` are whole header fields in the order of
``names``, each written ``Name: value`` (one space after the colon, folded with CRLF SP)
and ending with CRLF, as service/mail/render.py writes them; then their canonical form is the
lower-case name, the colon and the unfolded value, with no regular expression (a field
with a tab, a run of spaces or an empty value takes the general rule). ``body_parts`` are
the body's pieces in order, each of whole lines (the message is CRLF, not dot-stuffed).

Several keys (EINMAL_DKIM_SELECTOR and EINMAL_DKIM_PRIVATE_KEY_FILE comma-separated, selector
i with key i: RFC 8463's Ed25519 beside RSA) give one DKIM-Signature each, in the order of the
lists, the first on top: what prepending (RFC 6376 §5.6) gives when the last key signs first.
They share everything but their own tags and signature: ``h=``, ``t=``, ``bh=``, the campaign's
header hash and the message's canonical fields; none covers another's DKIM-Signature, so each
verifies alone.

Every header field of the message is signed. The keys are read once per process (`einmal
run` reads them at start-up: a missing, unreadable or unsupported key is one line and exit
2). The public key for DNS: ``public_record(key)`` (``v=DKIM1; k=…; p=…``).
"""

import base64
import functools
import hashlib
import re
from binascii import b2a_base64
from collections.abc import Callable, Sequence
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from service.errors import ConfigError
from service.mail.mailing import Mailing

CRLF = b"\r\n"
_WSP_RUN = re.compile(rb"[ \t]+")
_TRAILING_WSP = re.compile(rb"[ \t]+\r\n")
_FOLD_AT = 78
MIN_RSA_BITS = 1024

PrivateKey = rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey


def _relaxed_lines(data: bytes) -> bytes:
    """RFC 6376 3.4.4 within lines: runs of WSP become one SP, none at a line's end."""
    if b"\t" in data or b"  " in data or b" \r\n" in data:  # quoted-printable rarely has any
        return _TRAILING_WSP.sub(CRLF, _WSP_RUN.sub(b" ", data))
    return data


def _body_end(body: bytes) -> bytes:
    """RFC 6376 3.4.4 at the body's end: no empty lines; an empty body hashes as nothing."""
    while body.endswith(b"\r\n\r\n"):
        body = body.rstrip(b"\r\n") + CRLF
    return b"" if body == CRLF else body


def relaxed_body(body: bytes) -> bytes:
    """The relaxed canonical form of a whole body (RFC 6376 3.4.4)."""
    if body and not body.endswith(CRLF):
        body += CRLF
    return _body_end(_relaxed_lines(body))


def relaxed_headers(head: bytes) -> list[tuple[bytes, bytes]]:
    """(lower-case name, canonical field with CRLF) for each field of a header block (RFC 6376 3.4.2)."""
    fields: list[tuple[bytes, bytes]] = []
    for line in head.split(CRLF):
        if line[:1] in (b" ", b"\t") and fields:  # a continuation: unfolded into the field before
            name, canonical = fields[-1]
            value = (canonical[len(name) + 1 : -2] + b" " + line).strip(b" \t")
            fields[-1] = (name, name + b":" + _WSP_RUN.sub(b" ", value) + CRLF)
            continue
        name, _, value = line.partition(b":")
        name = name.rstrip(b" \t").lower()
        fields.append((name, name + b":" + _WSP_RUN.sub(b" ", value).strip(b" ") + CRLF))
    return fields


def _relaxed_fields(block: bytes) -> tuple[tuple[bytes, ...], bytes]:
    """The names and the canonical form of whole header fields, each ending with CRLF."""
    if not block:
        return (), b""
    if b"\t" in block or b"  " in block or b" \r\n" in block:
        fields = relaxed_headers(block[:-2])
        return tuple(name for name, _ in fields), b"".join(canonical for _, canonical in fields)
    # no tab, no run of spaces, no space before a line break: unfolding is all there is to do
    names, canonical = [], []
    for line in block[:-2].replace(b"\r\n ", b" ").split(CRLF):
        name, _, value = line.partition(b":")
        name = name.rstrip(b" ").lower()
        names.append(name)
        canonical.append(name + b":" + value.lstrip(b" ") + CRLF)
    return tuple(names), b"".join(canonical)


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
    """A key and the domain and selector it signs for; ``prepare`` a campaign to sign its messages."""

    __slots__ = ("_algorithm", "_key", "domain", "selector")

    def __init__(self, domain: str, selector: str, key: PrivateKey):
        self.domain, self.selector, self._key = domain, selector, key
        self._algorithm = b"rsa-sha256" if isinstance(key, rsa.RSAPrivateKey) else b"ed25519-sha256"

    def prepare(
        self,
        static_fields: bytes,
        static_pieces: Sequence[bytes] = (),
        static_body: bool = False,
        names: tuple[bytes, ...] = (),
    ) -> "CampaignSigner":
        return CampaignSigner((self,), static_fields, static_pieces, static_body, names)

    def sign_digest(self, digest: bytes) -> bytes:
        """The signature of a SHA-256 digest: RSA PKCS#1 v1.5 of it, or Ed25519 over it (RFC 8463)."""
        key = self._key
        if isinstance(key, rsa.RSAPrivateKey):
            return key.sign(digest, padding.PKCS1v15(), Prehashed(hashes.SHA256()))
        return key.sign(digest)

    def tags(self, names: tuple[bytes, ...]) -> list[bytes]:
        """The tags up to ``h=``, the same for every message with these header fields."""
        return [
            b"v=1;",
            b"a=" + self._algorithm + b";",
            b"c=relaxed/relaxed;",
            b"d=" + self.domain.encode() + b";",
            b"s=" + self.selector.encode() + b";",
            b"h=" + b":".join(names) + b";",
        ]

    def signature_start(self, names: tuple[bytes, ...]) -> tuple[bytes, bytes, Callable[[bytes], bytes]]:
        """This key's DKIM-Signature field up to h= folded (with CRLF) and canonical (without), and the
        function that signs a digest."""
        folded = _fold(self.tags(names))
        key = self._key
        # Ed25519: the key's own method, one call less
        sign: Callable[[bytes], bytes] = self.sign_digest if isinstance(key, rsa.RSAPrivateKey) else key.sign
        return folded + CRLF, relaxed_headers(folded)[0][1][:-2], sign


def _wrap(encoded: bytes) -> bytes:
    """A base64 value folded into lines of 72 characters (relaxed canonicalisation undoes it)."""
    if len(encoded) <= 144:  # an Ed25519 signature (88 characters): two lines
        return encoded[:72] + b"\r\n " + encoded[72:] if len(encoded) > 72 else encoded
    return b"\r\n ".join([encoded[i : i + 72] for i in range(0, len(encoded), 72)])


class Signers:
    """The keys that sign every message for one domain, each with its own DKIM-Signature, the first on top."""

    __slots__ = ("signers",)

    def __init__(self, signers: tuple[Signer, ...]):
        self.signers = signers

    def prepare(
        self,
        static_fields: bytes,
        static_pieces: Sequence[bytes] = (),
        static_body: bool = False,
        names: tuple[bytes, ...] = (),
    ) -> "CampaignSigner":
        return CampaignSigner(self.signers, static_fields, static_pieces, static_body, names)


# An RSA-2048 signature is ~0.3 ms of OpenSSL (`openssl speed rsa2048`: 0.29 ms on the bench machine), about what
# handing the render to a worker thread and taking the GIL back costs the loop: one node sent RSA-2048-signed mail
# at 0.38 x unsigned with the render in a thread, 0.61 x with it on the loop (`python -m bench.signing`). A 3072-bit
# key takes three times as long, a 4096-bit one eight: off the loop (cryptography releases the GIL meanwhile).
LOOP_RSA_BITS = 2048
BODY_HASHES = 256  # a campaign's body hashes kept by the message's own body parts (its merge fields' lines)
OWN_BYTES = 4096  # at most this much of a message's own body lines in a key: the kept keys hold a MB at most


class CampaignSigner:
    """One campaign's signing state: the canonical fields and pieces that every message shares, and the body hashes
    of its last bodies (BODY_HASHES of them), by their parts: recipients whose merge fields render alike share one."""

    __slots__ = ("_bodies", "_body_hash", "_keys", "_lower", "_pieces", "_static", "_static_body", "slow")

    def __init__(
        self,
        signers: tuple[Signer, ...],
        static_fields: bytes,
        static_pieces: Sequence[bytes],
        static_body: bool,
        names: tuple[bytes, ...],
    ):
        static_names, canonical = _relaxed_fields(static_fields)
        self._static = hashlib.sha256(canonical)
        # the message's own fields: "To: " -> "to:", the DKIM-Signature field up to h= folded and canonical
        self._lower = tuple((len(name) + 2, name.lower() + b":") for name in names)
        signed = static_names + tuple(name.lower() for name in names)  # h=: the same for every key
        self._keys = tuple(signer.signature_start(signed) for signer in signers)
        # a signature with a larger RSA key than LOOP_RSA_BITS renders in a worker thread, as a costly template
        # does (docs/design.md#templates); an RSA-2048 one, on the event loop
        self.slow = any(
            isinstance(key := signer._key, rsa.RSAPrivateKey) and key.key_size > LOOP_RSA_BITS for signer in signers
        )
        # static body pieces of whole lines, by value: a piece's hash is cached on the bytes object
        self._pieces = {piece: _relaxed_lines(piece) for piece in static_pieces if piece.endswith(CRLF)}
        self._static_body = static_body
        self._body_hash: bytes | None = None
        self._bodies: dict[tuple[bytes, ...], bytes] = {}

    def body_hash(self, parts: list[bytes]) -> bytes:
        """The base64 SHA-256 of the relaxed body made of ``parts``; once per campaign for a static body, once per
        body alike for the others while it is among the last BODY_HASHES (the static pieces are the same objects
        for every message: a key compares and hashes little more than the message's own lines, OWN_BYTES at most)."""
        if self._body_hash is not None:
            return self._body_hash
        key = tuple(parts)
        if (known_hash := self._bodies.get(key)) is not None:
            return known_hash
        get, canonical, own = self._pieces.get, [], 0
        for part in parts:
            known = get(part)
            if known is None:
                own += len(part)
                if not part.endswith(CRLF):  # not whole lines: canonicalise the body as one (and keep it not)
                    canonical, own = [relaxed_body(b"".join(parts))], OWN_BYTES + 1
                    break
                known = _relaxed_lines(part)
            canonical.append(known)
        body = b"".join(canonical)
        if body[-4:] == b"\r\n\r\n" or body == CRLF:  # empty lines at the end: RFC 6376 3.4.4
            body = _body_end(body)
        body_hash = b2a_base64(hashlib.sha256(body).digest(), newline=False)
        if self._static_body:
            self._body_hash = body_hash
        elif own <= OWN_BYTES:
            if len(self._bodies) >= BODY_HASHES:  # bounded: a campaign of distinct bodies keeps only the last
                self._bodies.clear()
            self._bodies[key] = body_hash
        return body_hash

    def _canonical_fields(self, fields: list[bytes]) -> bytes:
        """The relaxed canonical form of the message's own fields (RFC 6376 3.4.2)."""
        block = b"".join(fields)
        if b"\t" in block or b"  " in block or b" \r\n" in block or b":\r\n" in block:
            names, canonical = _relaxed_fields(block)
            if names != tuple(lower[:-1] for _, lower in self._lower):
                raise ValueError(f"DKIM: fields {names} where the campaign was prepared for other fields")
            return canonical
        if len(fields) != len(self._lower):
            raise ValueError(f"DKIM: {len(fields)} fields where the campaign was prepared for {len(self._lower)}")
        # every field "Name: value", folded at most with CRLF SP: name in lower case, the value unfolded
        return b"".join(
            [lower + field[skip:] for (skip, lower), field in zip(self._lower, fields, strict=False)]
        ).replace(b"\r\n ", b" ")

    def sign(self, fields: list[bytes], body_parts: list[bytes], now: float) -> bytes:
        """The DKIM-Signature field (ending with CRLF), one per key, for the message made of the
        campaign's static fields, ``fields`` (as ``names`` at ``prepare``) and a body of ``body_parts``."""
        times = b" t=%d; bh=%s;" % (int(now), self.body_hash(body_parts))
        # the campaign's header hash continued with the message's fields once; then per key (the first on
        # top) only its own field, b= empty, without the CRLF, and its signature
        head = self._static.copy()
        head.update(self._canonical_fields(fields))
        last = len(self._keys) - 1
        out = []
        for i, (folded, prefix, sign) in enumerate(self._keys):
            digest = head.copy() if i < last else head
            digest.update(b"%s%s b=" % (prefix, times))
            encoded = b2a_base64(sign(digest.digest()), newline=False)
            out.append(b"%s%s\r\n b=%s\r\n" % (folded, times, _wrap(encoded)))
        return b"".join(out)


def load_key(path: str) -> PrivateKey:
    """A PEM RSA or Ed25519 private key, or dkimpy's base64 Ed25519 seed; ConfigError saying why not."""
    where = f"EINMAL_DKIM_PRIVATE_KEY_FILE: {path}"
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it: {(exc.strerror or str(exc)).lower()}") from None
    return parse_key(data, where)


def parse_key(
    data: bytes,
    where: str,
    *,
    most_bits: int | None = None,
    least_bits: int = MIN_RSA_BITS,
    error: Callable[[str], Exception] = ConfigError,
) -> PrivateKey:
    """A key from its PEM text (or dkimpy's base64 Ed25519 seed): an unencrypted Ed25519 key, or an RSA key of
    `least_bits` (to `most_bits`); else `error`, one line starting with `where` that never quotes the key."""
    stripped = data.strip()
    if not stripped.startswith(b"-----"):
        try:
            seed = base64.b64decode(stripped, validate=True)
        except ValueError:
            seed = b""
        if len(seed) == 32:
            return ed25519.Ed25519PrivateKey.from_private_bytes(seed)
        raise error(f"{where}: not a PEM private key (nor a base64 Ed25519 seed)")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise error(f"{where}: the key is encrypted; give an unencrypted one") from None
    except (ValueError, UnsupportedAlgorithm):
        raise error(f"{where}: not a readable PEM private key") from None
    if isinstance(key, rsa.RSAPrivateKey):
        if most_bits is not None and not least_bits <= key.key_size <= most_bits:
            raise error(f"{where}: an RSA key of {key.key_size} bits; DKIM keys here have {least_bits} to {most_bits}")
        if key.key_size < least_bits:
            raise error(f"{where}: an RSA key of {key.key_size} bits; at least {least_bits} (2048 advised)")
        return key
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key
    raise error(f"{where}: a {type(key).__name__.removesuffix('PrivateKey')} key; DKIM signs with RSA or Ed25519")


@functools.cache
def _signer(domain: str, selector: str, path: str) -> Signer:
    return Signer(domain, selector, load_key(path))


def signer(mailing: Mailing) -> Signers | None:
    """The keys the DKIM variables describe (selector i with key file i), or None when unset; each key
    file is read once per process, in order: the first that is unusable is the ConfigError."""
    if not mailing.dkim_key_files or mailing.dkim_domain is None:
        return None
    return Signers(
        tuple(
            _signer(mailing.dkim_domain, selector, path)
            for selector, path in zip(mailing.dkim_selectors, mailing.dkim_key_files, strict=True)
        )
    )


@functools.lru_cache(maxsize=256)
def _account_signers(domain: str, selectors: tuple[str, ...], keys: tuple[str, ...]) -> Signers:
    """An account's keys for one From domain, each parsed once per process (a few hundred kept)."""
    d = domain.encode("idna").decode() if not domain.isascii() else domain
    return Signers(
        tuple(
            Signer(d, selector, parse_key(key.encode(), f"the DKIM key {i + 1} of {domain}"))
            for i, (selector, key) in enumerate(zip(selectors, keys, strict=True))
        )
    )


def account_signer(domains: Sequence, from_domain: str) -> Signers | None:
    """The keys an account holds for its From domain (service/accounts/identity.py DomainKeys, in domain_key
    form), or None when it holds none for that domain: then the environment's signer signs, if any, and
    never another account's key (docs/design.md#message-identity). ConfigError for a key that is unusable."""
    for found in domains:
        if found.domain == from_domain and found.keys:
            return _account_signers(found.domain, tuple(found.selectors), tuple(found.keys))
    return None


def public_record(key: PrivateKey) -> bytes:
    """The DNS TXT record of the key's public half: ``v=DKIM1; k=rsa|ed25519; p=…``."""
    public = key.public_key()
    if isinstance(public, ed25519.Ed25519PublicKey):
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return b"v=DKIM1; k=ed25519; p=" + base64.b64encode(raw)
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return b"v=DKIM1; k=rsa; p=" + base64.b64encode(der)
