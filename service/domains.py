"""Per-domain sending limits (EINMAL_DOMAIN_LIMITS) and the answers that throttle a domain
(docs/design.md#sending-budget).

    EINMAL_DOMAIN_LIMITS="gmail.com=20/s,5conn;outlook.com=10/s"

`N/s` is messages a second to the domain for all nodes together (send slots in
the claim, like EINMAL_RATE_LIMIT); `Nconn` is how many of a node's connections
may carry a message to it at once. A domain is the part of the address after
'@', as einmal keys addresses (an international name in Unicode form).
"""

from dataclasses import dataclass

from service.addresses import email_key


@dataclass(frozen=True)
class DomainLimit:
    rate: float | None = None  # messages a second, all nodes together
    connections: int | None = None  # a node's connections at once


def domain_key(domain: str) -> str:
    """The domain as einmal keys it: gmail.com for GMail.COM., bücher.example for xn--bcher-kva.example."""
    return email_key(f"x@{domain.strip().rstrip('.')}").rpartition("@")[2]


def parse_limits(value: str) -> dict[str, DomainLimit]:
    """ValueError naming the part that is wrong."""
    limits: dict[str, DomainLimit] = {}
    for part in filter(None, (p.strip() for p in value.split(";"))):
        domain, eq, spec = part.partition("=")
        if not eq or not domain.strip() or "@" in domain:
            raise ValueError(f"expected domain=N/s,Nconn;… (got {part!r})")
        try:
            key = domain_key(domain)
        except ValueError:
            raise ValueError(f"{domain.strip()!r} is not a domain name") from None
        rate, connections = None, None
        for item in filter(None, (i.strip().lower() for i in spec.split(","))):
            number = item.removesuffix("/s").removesuffix("conn")
            try:
                if item.endswith("/s") and rate is None and 0 < float(number) <= 100_000:
                    rate = float(number)
                    continue
                if item.endswith("conn") and connections is None and number.isdigit() and 0 < int(number) <= 256:
                    connections = int(number)
                    continue
            except ValueError:
                pass
            raise ValueError(f"{domain.strip()}: {item!r} is neither a rate like 20/s nor connections like 5conn")
        if rate is None and connections is None:
            raise ValueError(f"{domain.strip()}: give a rate like 20/s, connections like 5conn, or both")
        if key in limits:
            raise ValueError(f"{domain.strip()} is given twice")
        limits[key] = DomainLimit(rate, connections)
    return limits


# the reasons of a 5xx reply (service/smtp/reasons.py) by which a domain refuses a sender rather than an
# address: the domain is paused as for a throttle, its rows keep their place
REFUSALS = ("policy", "authentication")


def throttled(reply: str) -> bool:
    """A 4xx answer with enhanced status 4.7.x (421 4.7.0, 451 4.7.1): the domain asks us to slow down."""
    return reply[:1] == "4" and reply[4:8] == "4.7."
