"""The environment's documentation has one source, the descriptions of `Settings`: docs/reference/environment.md
and config/einmal.env.example are what `make env-docs` writes from them, `einmal run --help` lists the same
variables, and every variable einmal reads is among them."""

import re

import pytest

from service import settings_doc
from service.settings import Settings
from tests.conftest import ROOT, einmal

SOURCES = [*ROOT.glob("service/**/*.py"), *ROOT.glob("actors/**/*.py")]


def documented() -> set[str]:
    return {v.name for _, variables in settings_doc.sections() for v in variables}


@pytest.mark.parametrize("path", list(settings_doc.written()), ids=str)
def test_the_generated_file_is_current(path) -> None:
    assert (ROOT / path).read_text() == settings_doc.written()[path], f"{path} is stale: run `make env-docs`"


def test_every_setting_has_a_description_and_one_section() -> None:
    assert settings_doc.problems() == []
    assert [name for name, field in Settings.model_fields.items() if not (field.description or "").strip()] == []


def test_every_variable_einmal_reads_is_documented() -> None:
    read = {"EINMAL_" + name.upper() for name in Settings.model_fields}
    for path in SOURCES:
        read |= set(re.findall(r"\b(?:EINMAL|OTEL)_[A-Z_]+[A-Z]\b", path.read_text()))
    assert sorted(read - documented()) == []


def test_the_reference_and_the_example_file_name_every_variable_once() -> None:
    reference = (ROOT / settings_doc.REFERENCE).read_text()
    example = (ROOT / settings_doc.EXAMPLE).read_text()
    for name in documented():
        assert reference.count(f"| `{name}` |") == 1, name
        assert len(re.findall(rf"^#? ?{name}=", example, re.M)) == 1, name


def test_run_help_prints_the_generated_list() -> None:
    result = einmal("run", "--help")
    assert result.returncode == 0, result.stderr
    assert settings_doc.run_variables() in result.stdout
