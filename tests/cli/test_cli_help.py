"""The command line explains itself: the command list, --version, a help line for every option,
and the environment of `einmal run` (its list is generated: tests/core/test_settings_doc.py)."""

import argparse
import re

from service.cli import einmal as cli
from service.settings import Settings
from tests.conftest import ROOT, einmal

SOURCES = [*ROOT.glob("service/**/*.py"), *ROOT.glob("actors/**/*.py")]


def variables() -> set[str]:
    """Every EINMAL_ variable einmal reads: the settings' fields and the ones read directly."""
    named = {"EINMAL_" + name.upper() for name in Settings.model_fields}
    for path in SOURCES:
        named |= set(re.findall(r"\bEINMAL_[A-Z_]+[A-Z]\b", path.read_text()))
    return named


def test_einmal_alone_prints_the_command_list() -> None:
    result = einmal()
    assert result.returncode == 0, result.stderr
    for command in ("migrate", "run", "demo", "subscribers", "campaign", "suppress", "reconcile"):
        assert re.search(rf"^\s+{command}\b", result.stdout, re.M), command
    group = einmal("campaign")
    assert group.returncode == 0 and all(verb in group.stdout for verb in ("create", "list", "preview", "status"))


def test_version_prints_the_installed_version() -> None:
    result = einmal("--version")
    assert result.returncode == 0
    assert re.fullmatch(r"einmal \d+\.\d+\.\d+\S*\n", result.stdout)


def parsers(parser: argparse.ArgumentParser, path: str = "einmal"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from parsers(child, f"{path} {name}")


def test_every_option_and_argument_has_a_help_line() -> None:
    missing = [
        f"{path}: {action.option_strings or action.dest}"
        for path, parser in parsers(cli.build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert missing == []


def test_run_help_lists_the_environment_variables_it_reads() -> None:
    result = einmal("run", "--help")
    assert result.returncode == 0
    wanted = variables() - {"EINMAL_EMBEDDED_DIR"}  # the embedded server's, not the node's
    assert sorted(name for name in wanted if name not in result.stdout) == []
