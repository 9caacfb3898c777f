"""einmal's exceptions, one root, named by what went wrong; each carries how the command line (its exit code)
and the HTTP API (its status) say it.

    EinmalError                 anything einmal reports to a person in one line (exit 1, 500)
    ├── ConfigError             a malformed environment variable (exit 2)
    ├── NotFound                what was named is not there: a campaign, an account, a list (exit 1, 404)
    ├── Invalid                 what was given is not right: a field, a template, a file (exit 1, 422)
    │   └── ArgumentError       a bad argument judged without the database: a --at, a file that is not there
    │                           (exit 2, 422)
    ├── Conflict                what is asked, the state forbids: approve a sent campaign, retry a cancelled
    │                           one, an event id again with another payload (exit 1, 409)
    ├── Busy                    what is asked would pass a bound that time lowers: an account's queued
    │                           messages, its doctor runs (exit 1, 429 with Retry-After)
    └── DatabaseUnavailable     PostgreSQL cannot be reached (exit 1, 503)

Each entry point translates these at its boundary, in one place: the command line (service/cli/einmal.py),
the API (service/api/app.py) and the web surface (service/web/app.py); nothing else prints them.

An error about one field says so: `field`, the field's name as the API's JSON and the web's forms spell it, and
`code`, what is wrong with it (`from.not_an_address`). Its message names the field first (what is wrong:
"from 'x' is not a valid address") or last (how to put it right: "…; name one with subscriber"), so that each surface
words it for its own users (`worded`): the command line names its option (--from), the API the JSON field.
"""

from collections.abc import Mapping


def leaves(exc: BaseException) -> list[BaseException]:
    """The errors inside (possibly nested) exception groups, depth first; or the error itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


class EinmalError(Exception):
    exit_code = 1
    http_status = 500

    def __init__(self, message: str = "", *, code: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.code, self.field = code, field

    def worded(self, names: Mapping[str, str]) -> str:
        """The message with its field named as `names` (field → a surface's name for it) names it: the field
        it begins with, else the last word that is the field; the message as it is where `names` has none."""
        said, field = str(self), self.field
        if not field or field not in names:
            return said
        if said.startswith(field):
            return names[field] + said[len(field) :]
        at = said.rfind(field)
        end = at + len(field)
        if at > 0 and not _in_word(said[at - 1]) and (end == len(said) or not _in_word(said[end])):
            return said[:at] + names[field] + said[end:]
        return said


def _in_word(char: str) -> bool:
    return char.isalnum() or char in "_-"


class ConfigError(EinmalError):
    exit_code = 2


class NotFound(EinmalError):
    http_status = 404


class Invalid(EinmalError):
    http_status = 422


class ArgumentError(Invalid):
    exit_code = 2


class Conflict(EinmalError):
    http_status = 409


class Busy(EinmalError):
    http_status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)  # whole seconds


class DatabaseUnavailable(EinmalError):
    http_status = 503
