"""When a failed webhook delivery is tried again: the first attempt is at once; after the n-th failure, the
n-th of EINMAL_WEBHOOK_RETRY_SECONDS (default 5 s, 5 min, 30 min, 2 h, 5 h, then 10 h six times: about
2.8 days), jittered by 10% so that the deliveries of one outage do not all come back in the same second. A
`Retry-After` answer (seconds or an HTTP date) replaces the wait, bounded to [1 s, 10 h]. After the last wait's
attempt fails, the delivery is parked."""

import email.utils
import random
import time

RETRY_AFTER_MIN, RETRY_AFTER_MAX = 1.0, 36000.0
JITTER = 0.1


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After header's wait in seconds, bounded; None for none or one that is not understood."""
    if not value:
        return None
    value = value.strip()[:64]
    seconds: float
    if value.isascii() and value.isdigit():
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return min(max(seconds, RETRY_AFTER_MIN), RETRY_AFTER_MAX)


def next_delay(failures: int, delays: tuple[float, ...], asked: float | None = None) -> float | None:
    """Seconds until the next attempt after `failures` failed ones (1 after the first), or None: park it."""
    if failures > len(delays):
        return None
    if asked is not None:
        return asked
    wait = delays[failures - 1]
    return max(0.0, wait * (1 + random.uniform(-JITTER, JITTER)))
