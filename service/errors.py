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
"""


def leaves(exc: BaseException) -> list[BaseException]:
    """The errors inside (possibly nested) exception groups, depth first; or the error itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


class EinmalError(Exception):
    exit_code = 1
    http_status = 500


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
