"""einmal's errors carry their meaning to each entry point (service/errors.py): the command line exits with
the class's code and says its one line, the API answers the class's status with {"error": its line}."""

import httpx
import pytest

from service.api import app as api_app
from service.cli import einmal
from service.errors import ArgumentError, Conflict, EinmalError, Invalid, NotFound
from service.settings import Settings

MEANINGS = [
    (NotFound("no campaign with id 7"), 1, 404),
    (Invalid("--name must not be empty"), 1, 422),
    (ArgumentError("--at 'soon' is not an ISO-8601 time"), 2, 422),
    (Conflict("cannot approve campaign 7: it is sent"), 1, 409),
]


def said_by_the_command_line(
    error: EinmalError, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> tuple[int, str]:
    """(exit code, stderr) of a command that raises `error`."""

    def refused(func, args, settings) -> int:
        raise error

    monkeypatch.setattr(einmal, "run", refused)
    with pytest.raises(SystemExit) as exited:
        einmal.main(["campaign", "list"])
    return exited.value.code, capsys.readouterr().err  # type: ignore[return-value]


async def answered_by_the_api(error: EinmalError) -> httpx.Response:
    """The API's answer to a request whose route raises `error`."""
    app = api_app.api(None, Settings())  # type: ignore[arg-type]  # the route below takes no connection

    @app.get("/refused")
    async def refused() -> None:
        raise error

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://einmal") as client:
        return await client.get("/refused")


@pytest.mark.parametrize(("error", "exit_code", "status"), MEANINGS, ids=lambda v: type(v).__name__)
def test_each_error_says_its_exit_code_and_its_status(error: EinmalError, exit_code: int, status: int) -> None:
    assert (error.exit_code, error.http_status) == (exit_code, status)


@pytest.mark.parametrize(("error", "exit_code", "status"), MEANINGS, ids=lambda v: type(v).__name__)
def test_the_command_line_exits_with_the_errors_code_and_its_line(
    error: EinmalError, exit_code: int, status: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    assert said_by_the_command_line(error, monkeypatch, capsys) == (exit_code, f"einmal: {error}\n")


@pytest.mark.anyio
@pytest.mark.parametrize(("error", "exit_code", "status"), MEANINGS, ids=lambda v: type(v).__name__)
async def test_the_api_answers_the_errors_status_and_its_line(error: EinmalError, exit_code: int, status: int) -> None:
    answer = await answered_by_the_api(error)
    assert answer.status_code == status
    assert answer.json() == {"error": str(error)}


# one wrong field, as each surface names it: (error, the command line's line, the API's problem)
WORDED = [
    (
        Invalid("from 'x' is not a valid address", code="from.not_an_address", field="from"),
        "--from 'x' is not a valid address",
        {"error": "from 'x' is not a valid address", "code": "from.not_an_address", "field": "from"},
    ),
    (
        Conflict(
            "campaign 7 not approved: mail from forceful.example may be rejected (force approves it anyway)",
            code="force.doctor_failing",
            field="force",
        ),
        "campaign 7 not approved: mail from forceful.example may be rejected (--force approves it anyway)",
        {
            "error": "campaign 7 not approved: mail from forceful.example may be rejected "
            "(?force=true approves it anyway)",
            "code": "force.doctor_failing",
            "field": "force",
        },
    ),
    (
        Invalid(
            "not created: …, or create the campaign with unsubscribe", code="unsubscribe.required", field="unsubscribe"
        ),
        "not created: …, or create the campaign with --no-unsubscribe",
        {
            "error": 'not created: …, or create the campaign with "unsubscribe": false',
            "code": "unsubscribe.required",
            "field": "unsubscribe",
        },
    ),
    (Invalid("the name of a field no surface renames", field="name"), "the name of a field no surface renames", None),
    (Invalid("a fromage, no field's word", field="from"), "a fromage, no field's word", None),
]


@pytest.mark.parametrize(("error", "line", "problem"), WORDED, ids=lambda v: getattr(v, "field", None))
def test_the_command_line_names_the_option_of_the_field(
    error: EinmalError, line: str, problem: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    assert said_by_the_command_line(error, monkeypatch, capsys)[1] == f"einmal: {line}\n"


@pytest.mark.anyio
@pytest.mark.parametrize(("error", "line", "problem"), WORDED, ids=lambda v: getattr(v, "field", None))
async def test_the_api_names_the_json_field_and_says_its_code(error: EinmalError, line: str, problem: dict) -> None:
    answer = await answered_by_the_api(error)
    assert answer.json() == (problem or {"error": str(error), "field": error.field})
