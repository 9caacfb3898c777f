"""Parse cost of a bounce: microseconds per message over the real samples (tests/inbound/samples/), in this process.

`python -m bench.bounces` prints the figure, and `python -m bench` with the others: each sample
parsed as the inbound listener's worker process parses it (service/inbound/reports.py ``parse``), the
best of five rounds (--quick: of two).
"""

import sys
import timeit

from service.inbound import bounces
from tests.support import bounce_samples


def microseconds(rounds: int = 5) -> tuple[int, float]:
    """(messages, µs per message) over every sample of every set, the best of `rounds`."""
    messages = [
        bounce_samples.message(name, file) for name in bounce_samples.SETS for file in bounce_samples.expected(name)
    ]

    def once() -> None:
        for data in messages:
            bounces.parse(data)

    return len(messages), min(timeit.repeat(once, number=1, repeat=rounds)) / len(messages) * 1e6


def main() -> int:
    n, us = microseconds()
    print(f"bounce parse: {us:.0f} µs/message ({n} real bounces of five sets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
