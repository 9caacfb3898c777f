"""Console passwords, hashed with argon2id (argon2-cffi's PasswordHasher, its recommended parameters: some
64 MiB and tens of milliseconds a hash), always in a worker thread, a few at a time, never on the event loop.
Only the hash is stored; the password itself is never logged nor kept."""

import functools
import secrets

import anyio
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from service.errors import Busy, Invalid

HASHER = PasswordHasher()
MIN_LENGTH, MAX_LENGTH = 12, 1024
HASHES_AT_ONCE = 2  # argon2 runs at a time in a process: each takes its memory and a core
WAITING = 32  # sign-ins waiting for one, past which another is refused (Busy)


@functools.cache
def limiter() -> anyio.CapacityLimiter:
    """The process's bound on argon2 runs at a time (made in the running event loop, once)."""
    return anyio.CapacityLimiter(HASHES_AT_ONCE)


def checked(password: str) -> str:
    """`password` when it may be one; Invalid when not (its text is never said)."""
    if not MIN_LENGTH <= len(password) <= MAX_LENGTH:
        raise Invalid(f"a password has {MIN_LENGTH} to {MAX_LENGTH} characters")
    if not password.isprintable():
        raise Invalid("a password has printable characters only")
    return password


def generated() -> str:
    """A new random password: 20 characters, 120 bits."""
    return secrets.token_urlsafe(15)


async def hashed(password: str, check: bool = True) -> str:
    """The argon2id hash of `password` (checked first, unless not `check`), made in a worker thread."""
    return await anyio.to_thread.run_sync(HASHER.hash, checked(password) if check else password, limiter=limiter())


@functools.cache
def _stand_in() -> str:
    """A hash to verify against for a name no user has, so that its answer takes as long as a wrong password."""
    return HASHER.hash(generated())


def _verify(stored: str | None, password: str) -> tuple[bool, bool]:
    """(whether `password` is the one `stored` hashes, whether the hash should be made again)."""
    try:
        HASHER.verify(stored or _stand_in(), password)
    except (VerificationError, InvalidHashError):
        return False, False
    return stored is not None, HASHER.check_needs_rehash(stored or "")


async def verified(stored: str | None, password: str) -> tuple[bool, bool]:
    """`_verify` in a worker thread; `stored` None: no such user (a stand-in is verified, in the same time).
    Busy when WAITING verifications wait for a thread already: a flood of sign-ins queues no further."""
    if len(password) > MAX_LENGTH:
        return False, False
    if limiter().statistics().tasks_waiting >= WAITING:
        raise Busy("too many sign-ins at once; try again shortly", retry_after=2)
    return await anyio.to_thread.run_sync(_verify, stored, password, limiter=limiter())
