"""The command line's names for the fields the services' errors name (service/errors.py)."""

# The option each field is given with, where the services' errors name a field (service/errors.py): the
# same wrong value is `from` to the API and `--from` here. A field some command takes as a positional
# argument (a name, a domain) is not here: those commands pass their option's name themselves.
FLAGS = {
    "algorithm": "--algorithm",
    "bits": "--bits",
    "contact": "--contact",
    "display_name": "--display-name",
    "force": "--force",
    "from": "--from",
    "header": "--header",
    "language": "--language",
    "list_id": "--list-id",
    "lists": "--list",
    "private_key": "--key-file",
    "quota_day": "--quota-day",
    "quota_hour": "--quota-hour",
    "rate": "--rate",
    "reply_to": "--reply-to",
    "return_path": "--return-path",
    "return_path_secret": "--return-path-secret-file",
    "selector": "--selector",
    "subscriber": "--subscriber",
    "title": "--title",
    "unsubscribe": "--no-unsubscribe",
    "unsubscribe_mailto": "--unsubscribe-mailto",
    "url": "--url",
    "weight": "--weight",
}
