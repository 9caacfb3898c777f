"""`python -m bench.dbcost` names each statement pg_stat_statements shows by the einmal query it starts like
(bench/database.py `_label`): a query's own text, as the server shows it, is named by its file, and a statement
of no query is shown as itself. The labels are read only where the server preloads pg_stat_statements, so no
campaign run of the suite would notice them broken."""

from bench.database import _label
from service import db


def test_a_querys_statement_is_named_by_its_file_and_another_is_shown_as_itself() -> None:
    shown = "  ".join(db.QUERIES["send_advance"].text.split("\n"))  # whitespace folded otherwise
    assert _label(shown) == "sql/queries/send_advance.sql"
    assert _label("SELECT pid FROM pg_stat_activity WHERE datname = $1") == (
        "SELECT pid FROM pg_stat_activity WHERE datname = $1"
    )
