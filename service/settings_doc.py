"""The environment's documentation, written from `Settings`' field descriptions: docs/reference/environment.md,
config/einmal.env.example and the variable list of `einmal run --help`. `python -m service.settings_doc`
(`make env-docs`) writes the two files; tests/core/test_settings_doc.py fails when they are not current."""

import re
import shlex
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

from service.settings import OTHER_VARIABLES, Settings


class Variable(NamedTuple):
    name: str
    default: str | None  # as written in the environment; None: unset
    example: str  # for an unset one: the value its commented line shows
    description: str  # Markdown


# variables einmal reads that are not `Settings` fields: the embedded server's, and OpenTelemetry's own
EXTRA = {
    "EINMAL_EMBEDDED_DIR": Variable(
        "EINMAL_EMBEDDED_DIR",
        None,
        "/var/lib/einmal",
        "where the embedded PostgreSQL keeps its data (`<dir>/pgdata`); unset: `~/.local/share/einmal`",
    ),
    "OTEL_TRACES_EXPORTER": Variable(
        "OTEL_TRACES_EXPORTER",
        "none",
        "",
        "OpenTelemetry traces: `none`, `console`, or `otlp` (OTLP over HTTP); any other value stops every command "
        "alike with one line, exit 2 ([Traces](../operations/monitoring.md#traces))",
    ),
    "OTEL_EXPORTER_OTLP_ENDPOINT": Variable(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://127.0.0.1:4318",
        "",
        "where `otlp` sends them (`config/otel-collector.yaml` listens there)",
    ),
    "OTEL_SERVICE_NAME": Variable("OTEL_SERVICE_NAME", "einmal", "", "`service.name` on every span"),
}

# (title, variables): how the reference and the example file group them, in this order
SECTIONS = [
    ("Database", ["database_url", "database_pooler", "listen_database_url", "EINMAL_EMBEDDED_DIR"]),
    (
        "SMTP relay",
        [
            "smtp_host",
            "smtp_port",
            "smtp_tls",
            "smtp_tls_ca_file",
            "smtp_username",
            "smtp_password",
            "smtp_urls",
            "smtp_connections",
            "smtp_timeout_seconds",
        ],
    ),
    (
        "Sending",
        [
            "batch_size",
            "tick_seconds",
            "node_timeout_seconds",
            "db_timeout_seconds",
            "db_wait_seconds",
            "in_doubt",
            "max_attempts",
            "retry_base_seconds",
            "retry_max_seconds",
        ],
    ),
    ("Sequences", ["sequence_batch", "sequence_tick_seconds", "sequence_wait_seconds"]),
    ("Replication", ["require_synchronous_replication", "journal_seconds", "journal_size"]),
    (
        "Sending policy",
        [
            "rate_limit",
            "quota_hour",
            "quota_day",
            "quota_hour_seconds",
            "quota_day_seconds",
            "account_rate_limit",
            "account_quota_hour",
            "account_quota_day",
            "account_messages_queued",
            "domain_limits",
            "domain_pause_seconds",
            "domain_pause_max_seconds",
            "domain_probes",
            "pause_complaint_rate",
            "pause_hard_bounce_rate",
            "pause_policy_rejection_rate",
            "pause_min_sample",
        ],
    ),
    (
        "The node",
        ["node_id", "shutdown_grace_seconds", "restart_intensity", "restart_period_seconds", "retention_days"],
    ),
    (
        "HTTP surface",
        [
            "http_address",
            "http_header_timeout_seconds",
            "http_body_timeout_seconds",
            "http_max_connections",
            "http_body_buffer_bytes",
            "http_client_connections",
            "http_client_body_bytes",
        ],
    ),
    ("Console", ["console_session_idle_seconds", "console_session_lifetime_seconds"]),
    (
        "Message headers and unsubscribe",
        ["from_domains", "message_id_domain", "unsubscribe_url", "unsubscribe_mailto", "unsubscribe_secret"],
    ),
    (
        "Double opt-in",
        [
            "confirm_url",
            "optin_from",
            "optin_window_hours",
            "optin_address_limit",
            "optin_client_limit",
            "optin_list_limit",
        ],
    ),
    ("Click and open tracking", ["click_url", "click_scanners_file", "open_proxies_file"]),
    ("Transactional messages", ["message_key_hours", "message_retention_days"]),
    ("DKIM signing", ["dkim_domain", "dkim_selector", "dkim_private_key_file"]),
    ("DNS checks (`einmal doctor`)", ["dns_servers", "doctor_cache_seconds"]),
    (
        "Bounces and complaints",
        [
            "return_path",
            "return_path_secret",
            "inbound_smtp_address",
            "inbound_protocol",
            "inbound_max_bytes",
            "inbound_timeout_seconds",
            "soft_bounce_limit",
            "soft_bounce_days",
        ],
    ),
    (
        "Provider webhooks",
        [
            "ses_certificate_file",
            "webhook_accounts_file",
            "ses_topic_arn",
            "postmark_webhook_secret",
            "mailgun_webhook_signing_key",
        ],
    ),
    (
        "Outbound webhooks",
        [
            "webhook_timeout_seconds",
            "webhook_retry_seconds",
            "webhook_in_flight",
            "webhook_endpoint_in_flight",
            "webhook_account_in_flight",
            "webhook_tick_seconds",
            "webhook_allowed_networks",
            "webhook_allow_http_loopback",
            "webhook_rotation_hours",
            "webhook_retention_days",
        ],
    ),
    (
        "Logs and traces",
        ["log_level", "log_format", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME"],
    ),
]

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = re.compile(r"# ?[A-Z][A-Z0-9_]*=")
REFERENCE = Path("docs/reference/environment.md")
EXAMPLE = Path("config/einmal.env.example")


def _written(value: object) -> str:
    """A default as the environment writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def variable(key: str) -> Variable:
    """A section's entry: a `Settings` field's name or an EXTRA variable's."""
    if key in EXTRA:
        return EXTRA[key]
    field = Settings.model_fields[key]
    default = None if field.default is None else _written(field.default)
    example = str(field.examples[0]) if field.examples else ""
    return Variable(f"EINMAL_{key.upper()}", default, example, field.description or "")


def problems() -> list[str]:
    """What keeps the documentation from being whole: a field without a description, a variable in no section or
    in two, an unknown one in a section. `make env-docs` refuses to write while there is one."""
    keys = [key for _, members in SECTIONS for key in members]
    wanted = [*Settings.model_fields, *EXTRA]
    found = [f"Settings.{name} has no description" for name, f in Settings.model_fields.items() if not f.description]
    found += [f"{key} is in no section of SECTIONS" for key in wanted if key not in keys]
    found += [f"{key} is in SECTIONS twice" for key in sorted(set(keys)) if keys.count(key) > 1]
    found += [f"{key} in SECTIONS is no setting" for key in keys if key not in wanted]
    found += [
        f"{name} (settings.OTHER_VARIABLES) has no entry in EXTRA" for name in OTHER_VARIABLES if name not in EXTRA
    ]
    return found


def sections() -> list[tuple[str, list[Variable]]]:
    """Every variable by section; one in no section (a problem the tests catch) under "Other", so that
    `einmal run --help` never fails for it."""
    keys = {key for _, members in SECTIONS for key in members}
    known = [*Settings.model_fields, *EXTRA]
    grouped = [(title, [variable(key) for key in members if key in known]) for title, members in SECTIONS]
    other = [variable(key) for key in known if key not in keys]
    return grouped + ([("Other", other)] if other else [])


def _plain(markdown: str) -> str:
    """Markdown as plain text: links as their text, no backticks or bold."""
    return re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", markdown).replace("`", "").replace("**", "")


def reference() -> str:
    """docs/reference/environment.md."""
    lines = [
        "# Environment",
        "",
        "<!-- written by `make env-docs` (python -m service.settings_doc) from the descriptions of Settings in",
        "     service/settings.py: edit those, not this page -->",
        "",
        "einmal is configured by environment variables only; `config/einmal.env.example` holds every one with its",
        "default, to copy and edit. A malformed value stops any command with one line naming the variable (exit 2);",
        "an `EINMAL_` variable einmal does not read is one warning line naming the closest one it does. See",
        "[Configuration](configuration.md) for how they are loaded.",
    ]
    for title, variables in sections():
        lines += ["", f"## {title}", "", "| variable | default | meaning |", "|---|---|---|"]
        for v in variables:
            default = "unset" if v.default is None else f"`{v.default}`"
            lines.append(f"| `{v.name}` | {default} | {v.description.replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"


def _shell(value: str) -> str:
    """A value as a line of the example file writes it: quoted only where a shell needs it."""
    return value if value == "" else shlex.quote(value)


def example_file() -> str:
    """config/einmal.env.example."""
    lines = [
        "# einmal's configuration: environment variables only. Copy this file, edit it, and load it",
        "# (systemd: EnvironmentFile=; a shell: set -a; . ./einmal.env; set +a; docker: --env-file, which keeps",
        "# quotes: write a quoted value there without its quotes).",
        '# Every value below is the default; a line starting with "# EINMAL_" is unset by default.',
        "# A malformed value stops every command with one line naming the variable (exit code 2).",
        "# Written by `make env-docs` from service/settings.py; docs/reference/environment.md says the same.",
    ]
    for title, variables in sections():
        lines += ["", f"# == {title}"]
        for v in variables:
            comment = textwrap.wrap(_plain(v.description), 112, initial_indent="# ", subsequent_indent="#   ")
            if any(ASSIGNMENT.match(line) for line in comment):  # a shell, or a reader, would take it for one
                raise ValueError(f"{v.name}: its description starts a line with an assignment: {comment}")
            lines += comment
            if v.default is None:
                lines.append(f"# {v.name}={_shell(v.example)}")
            else:
                lines.append(f"{v.name}={_shell(v.default)}")
    return "\n".join(lines) + "\n"


def run_variables() -> str:
    """The epilog of `einmal run --help`: every variable it reads, by section."""
    lines = [
        "environment (each variable's default and meaning: docs/reference/environment.md; a file to start",
        "from: config/einmal.env.example):",
    ]
    for title, variables in sections():
        names = ", ".join(v.name + (" (or DATABASE_URL)" if v.name == "EINMAL_DATABASE_URL" else "") for v in variables)
        lines += textwrap.wrap(f"{title}: {names}", 100, initial_indent="  ", subsequent_indent="      ")
    return "\n".join(lines)


def written() -> dict[Path, str]:
    """Each generated file (relative to the source tree) and what it should hold."""
    return {REFERENCE: reference(), EXAMPLE: example_file()}


def main() -> int:
    if found := problems():
        print("\n".join(["nothing written:", *found]), file=sys.stderr)
        return 1
    for path, text in written().items():
        (ROOT / path).write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
