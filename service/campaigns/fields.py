"""What a draft is made of, checked the same way for `einmal campaign create` and the API's create and change:
one-line fields, addresses, bodies, the list names, the templates (compiled in the sandbox)."""

import re
from collections.abc import Callable
from datetime import datetime, time
from email.utils import parseaddr
from typing import Any

import anyio
from email_validator import EmailNotValidError

from service.addresses import normalized_address
from service.errors import Invalid
from service.subscribers import texts
from service.text import MAX_LIST, body_text, one_line, shown, unsafe_text

DEFAULT_LIST = "default"
MAX_CAMPAIGN_NAME, MAX_SUBJECT, MAX_FROM = 200, 998, 500


_NAMED = re.compile(r"^(?P<name>[^<>]*)<(?P<addr>[^<>]*)>$")


def from_address(value: str, field: str = "from") -> str:
    """A bare address or `Display Name <address>` (`field`: which, the From or the Reply-To); returned with the
    address normalised."""
    value = one_line(value, field, MAX_FROM)
    named = _NAMED.match(value)
    name, addr = (named["name"].strip(), named["addr"].strip()) if named else ("", value)
    try:  # the import's rules: syntax, not reachability (the relay decides); .test and the like pass
        normalized = normalized_address(addr)
    except EmailNotValidError as exc:
        raise Invalid(
            f"{field} {shown(value)} is not a valid address: {exc}", code=f"{field}.not_an_address", field=field
        ) from None
    result = f"{name} <{normalized}>" if name else normalized
    if parseaddr(result)[1] != normalized:  # the display name would be misread in a header
        raise Invalid(
            f"{field} {shown(value)}: quote the display name, e.g. '\"{name}\" <{addr}>'",
            code=f"{field}.unquoted_name",
            field=field,
        )
    return result


def check_templates(subject: str | None, text: str | None, html: str | None) -> None:
    """Compile each template given (None: not given) in the sandbox; Invalid for one that does not."""
    from service.mail.render import check_template  # the sandbox: imported when first needed

    if subject is not None:
        check_template(subject, "subject")
    if text is not None:
        check_template(text, "text body")
    if html is not None:
        check_template(html, "html body", html=True)


def list_names(given: list[str]) -> list[str]:
    """The list names, each given once (none: the list `default`); Invalid for one no import could have
    created."""
    for name in given:
        if not name.strip() or unsafe_text(name) or len(name) > MAX_LIST:
            raise Invalid(
                f"lists {shown(name)}: 1 to {MAX_LIST} printable characters", code="lists.name", field="lists"
            )
    return list(dict.fromkeys(given or [DEFAULT_LIST]))


def aware(at: datetime) -> datetime:
    """A start time that names its time zone."""
    if at.tzinfo is None:
        raise Invalid("at: give its time zone, e.g. 2027-01-01T09:00:00+01:00", code="at.no_time_zone", field="at")
    return at


_LOCAL_TIME = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")


def local_time(value: str, field: str = "local_time") -> time:
    """A time of day, `HH:MM` (each row goes out at it in its recipient's time zone); Invalid for anything else."""
    found = _LOCAL_TIME.match(value) if isinstance(value, str) else None
    if found is None:
        raise Invalid(
            f"{field} {shown(str(value))}: a time of day from 00:00 to 23:59, e.g. 09:00",
            code="local_time.not_a_time",
            field="local_time",
        )
    return time(int(found[1]), int(found[2]))


RULES: dict[str, Callable[[Any], Any]] = {
    "name": lambda v: one_line(v, "name", MAX_CAMPAIGN_NAME),
    "subject": lambda v: one_line(v, "subject", MAX_SUBJECT),
    "from_address": from_address,
    "reply_to": lambda v: from_address(v, "reply_to"),
    "text": lambda v: body_text(v, "text"),
    "html": lambda v: body_text(v, "html"),
    "at": aware,
    "lists": list_names,
    "language": texts.checked,
    "unsubscribe": bool,
    "track_clicks": bool,
    "local_time": local_time,
    "track_opens": bool,
}


async def checked(fields: dict[str, Any], limiter: anyio.CapacityLimiter | None = None) -> dict[str, Any]:
    """The fields of a draft that are given (as RULES names them), checked as `einmal campaign create` checks
    its options, the templates compiled in the sandbox in a worker thread; None stays None. Invalid for the
    first that is not right. `limiter`: the worker threads', of a process that serves others."""
    fields = {name: RULES[name](value) if value is not None else None for name, value in fields.items()}
    await anyio.to_thread.run_sync(
        check_templates, fields.get("subject"), fields.get("text"), fields.get("html"), limiter=limiter
    )
    return fields
