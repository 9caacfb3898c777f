"""Which account each provider webhook credential vouches for (docs/design.md#inbound-events).

A request's credential — Postmark's basic auth, the Mailgun signing key its signature verifies
with, the SNS topic an SES message was published to — names one account, and its events touch
only that account's rows; the account in the URL may repeat it, never widen it. Each account's
own credentials are in EINMAL_WEBHOOK_ACCOUNTS_FILE, a TOML table for each account name:

    [acme]
    ses_topic_arn = "arn:aws:sns:us-west-2:111111111111:acme-feedback"  # or a list of them
    postmark_webhook_secret = "acme:a-long-password"                     # user:password
    mailgun_webhook_signing_key = "…"

EINMAL_SES_TOPIC_ARN, EINMAL_POSTMARK_WEBHOOK_SECRET and EINMAL_MAILGUN_WEBHOOK_SIGNING_KEY are
a single-account installation's: their credential vouches for the only account the database
holds (None below) and is refused while it holds several. A provider's credentials come from one
of the two places, not both; one credential given to two accounts could not say whose its events
are. Either is a ConfigError (one line, exit 2) at start-up, as is a file einmal cannot use.
"""

import tomllib
from pathlib import Path

from pydantic import SecretStr

from service.errors import ConfigError
from service.settings import Settings

FIELDS = ("ses_topic_arn", "postmark_webhook_secret", "mailgun_webhook_signing_key")
MAX_ACCOUNT = 200


def credentials(settings: Settings) -> dict[str, dict[str, str | None]]:
    """For each of FIELDS: each credential and the account it vouches for (None: the only one)."""
    found: dict[str, dict[str, str | None]] = {field: {} for field in FIELDS}
    path = settings.webhook_accounts_file
    for account, table in (_read(path) if path else {}).items():
        for field, values in table.items():
            for value in values:
                if value in found[field]:
                    raise ConfigError(
                        f"EINMAL_WEBHOOK_ACCOUNTS_FILE: {path}: accounts {found[field][value]!r} and "
                        f"{account!r} have the same {field}: a credential must name one account"
                    )
                found[field][value] = account
    single: dict[str, list[str] | list[SecretStr | None]] = {
        "ses_topic_arn": settings.ses_topic_arn.split(",") if settings.ses_topic_arn else [],
        "postmark_webhook_secret": [settings.postmark_webhook_secret],
        "mailgun_webhook_signing_key": [settings.mailgun_webhook_signing_key],
    }
    for field, given in single.items():
        values = [v if isinstance(v, str) else v.get_secret_value() for v in given if v is not None]
        if values and found[field]:
            raise ConfigError(
                f"EINMAL_{field.upper()}: a single-account installation's; with "
                f"EINMAL_WEBHOOK_ACCOUNTS_FILE, give each account its own {field} there"
            )
        found[field].update(dict.fromkeys(values))
    return found


def _read(path: str) -> dict[str, dict[str, list[str]]]:
    where = f"EINMAL_WEBHOOK_ACCOUNTS_FILE: {path}"
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"EINMAL_WEBHOOK_ACCOUNTS_FILE: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8") from None
    except tomllib.TOMLDecodeError as exc:  # its message says where, and quotes nothing of the file
        raise ConfigError(f"{where}: not TOML: {str(exc).splitlines()[0]}") from None
    accounts = {}
    for account, table in document.items():
        if not (0 < len(account) <= MAX_ACCOUNT and account.isprintable()) or not isinstance(table, dict):
            raise ConfigError(
                f"{where}: expected a table for each account, e.g. [acme], named by 1 to "
                f"{MAX_ACCOUNT} printable characters"
            )
        accounts[account] = {
            field: _values(f"{where}: account {account!r}: {field}", field, value) for field, value in table.items()
        }
    return accounts


def _values(where: str, field: str, value: object) -> list[str]:
    """The credentials of one field; the values are never quoted: most are secrets."""
    if field not in FIELDS:
        raise ConfigError(f"{where}: not one of {', '.join(FIELDS)}")
    if field == "ses_topic_arn":
        values = value if isinstance(value, list) else [value]
        if not values or not all(
            isinstance(v, str) and v.startswith("arn:") and v.isprintable() and "," not in v and len(v) <= 256
            for v in values
        ):
            raise ConfigError(f"{where}: expected an SNS topic ARN (arn:aws:sns:…) or a list of them")
        return [str(v) for v in values]  # each one a str, as checked
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        raise ConfigError(f"{where}: expected a string")
    if field == "postmark_webhook_secret" and not all(value.partition(":")[::2]):
        raise ConfigError(f"{where}: expected user:password, the basic auth credentials of the webhook's URL")
    return [value]
