"""einmal's exceptions, one root, named by outcome.

    EinmalError                 anything einmal reports to a person in one line
    ├── ConfigError             a malformed environment variable (exit 2)
    ├── UsageError              bad input: unknown campaign, bad file, refused transition (exit 1)
    │   └── ArgumentError       a bad argument judged without the database: a --at, a file that is not there (exit 2)
    ├── DatabaseUnavailable     PostgreSQL cannot be reached (exit 1)
    └── SendFailure             an SMTP transaction did not deliver
        ├── TransientSendFailure    4xx, or the connection was lost before the end of DATA
        ├── PermanentSendFailure    5xx
        └── InDoubtSendFailure      the connection was lost after the end of DATA, before the reply

The command line translates these at its boundary; nothing else prints them.
"""


def leaves(exc: BaseException) -> list[BaseException]:
    """The errors inside (possibly nested) exception groups, depth first; or the error itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


class EinmalError(Exception):
    exit_code = 1


class ConfigError(EinmalError):
    exit_code = 2


class UsageError(EinmalError):
    pass


class ArgumentError(UsageError):
    exit_code = 2


class DatabaseUnavailable(EinmalError):
    pass


class SendFailure(EinmalError):
    def __init__(self, reply: str):
        super().__init__(reply)
        self.reply = reply


class TransientSendFailure(SendFailure):
    pass


class PermanentSendFailure(SendFailure):
    pass


class InDoubtSendFailure(SendFailure):
    pass
