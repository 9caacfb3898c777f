"""Text that einmal stores or shows: the length limits of its fields and the checks of one value.

Every surface that takes a name, an address or a list from outside (the CSV import, the CLI, the API,
the sign-up form) checks it against these limits, so that a value one of them accepts the others accept
too, and a message quotes a value the same way everywhere (`shown`).
"""

import re

from service.errors import Invalid

MAX_EMAIL, MAX_NAME, MAX_LIST, MAX_ACCOUNT = 254, 1000, 200, 200
MAX_ATTRIBUTE = 10_000  # characters in one attribute value of a subscriber
MAX_REASON = 200  # characters in the reason of a suppression

# C0 and C1 controls (CR, LF and TAB included), DEL, the Unicode line and paragraph
# separators, and the lone surrogates that stand for bytes that are not UTF-8.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\udc80-\udcff]")


def unsafe_text(value: str) -> str | None:
    """Why `value` may not be stored (a line break, a control character, bytes not UTF-8), or None."""
    found = _UNSAFE.search(value)
    if found is None:
        return None
    char = found.group()
    if char in "\r\n\u2028\u2029":
        return "line break inside a field"
    if "\udc80" <= char <= "\udcff":
        return "not valid UTF-8"
    return f"control character U+{ord(char):04X} in a field"


def shown(value: str, limit: int = 60) -> str:
    """``value`` quoted for a message: one line, at most about ``limit`` characters."""
    return repr(value if len(value) <= limit else value[: limit - 3] + "...")


def body_text(value: str, field: str) -> str:
    """A body: any text PostgreSQL can store (UTF-8, no NUL)."""
    if "\0" in value:
        raise Invalid(f"{field}: contains a NUL character", code=f"{field}.nul", field=field)
    if any("\ud800" <= c <= "\udfff" for c in value):
        raise Invalid(f"{field}: not valid UTF-8", code=f"{field}.not_utf8", field=field)
    return value


def one_line(value: str, field: str, limit: int = 998) -> str:
    """``value`` stripped; Invalid unless it is 1 to ``limit`` printable characters of UTF-8."""
    problem = unsafe_text(value)
    if problem == "line break inside a field" or "\0" in value:
        raise Invalid(f"{field} must not contain line breaks", code=f"{field}.line_break", field=field)
    if problem:
        said = problem.replace(" in a field", "")
        raise Invalid(f"{field}: {said}: must be printable text", code=f"{field}.not_printable", field=field)
    if not value.strip():
        raise Invalid(f"{field} must not be empty", code=f"{field}.empty", field=field)
    if len(value.strip()) > limit:
        raise Invalid(f"{field} is longer than {limit} characters", code=f"{field}.too_long", field=field)
    return value.strip()


def check_account(name: str) -> str:
    """``name`` when it can name an account; Invalid when not."""
    if not name.strip() or unsafe_text(name) or len(name) > MAX_ACCOUNT:
        raise Invalid(f"invalid account name {shown(name)}: 1 to {MAX_ACCOUNT} printable characters")
    return name
