"""A list's own confirmation subject and text (double opt-in, docs/guide/double-opt-in.md), checked the same way
for `einmal lists form open --subject --text-file` and PUT /api/v1/lists/{name}/form.

They are templates as a campaign's are ({{ campaign.name }}, {{ email }}, {{ confirm_url }}…). The subject is
one header line: no CR or LF (a line break there would add headers), at most MAX_SUBJECT characters; the text
at most MAX_TEXT. Both are compiled in the campaign templates' sandbox (service/mail/templates.py) and rendered
once for a new sign-up (an address, no name, no attributes: what a form's sign-up brings), in a worker thread,
never on the event loop: what fails for that sign-up would fail every confirmation. The text must show the
confirmation link: einmal does not add it (where it stands, and what is said around it, is the sender's), and a
text whose render for that sign-up lacks the link of {{ confirm_url }} is refused. Every refusal is an
ArgumentError of one line (exit 2, 422). Neither given: the list's stays; '': none, einmal's own again.
"""

import anyio.to_thread

from service.errors import ArgumentError, Invalid
from service.mail import templates
from service.text import body_text, one_line

MAX_SUBJECT, MAX_TEXT = 200, 10_000
LINK = "{{ confirm_url }}"
_LINK = "https://example.org/confirm?token=a-new-sign-up"
_SIGN_UP = {  # a new sign-up from a form, as a confirmation renders it
    "name": "",
    "email": "new@example.org",
    "unsubscribe_url": "",
    "confirm_url": _LINK,
    "attributes": {},
    "campaign": {"id": 1, "name": "the mailing list"},
}


def subject(value: str, field: str = "subject") -> str:
    """A list's own confirmation subject, stripped ('' when blank: none); ArgumentError when it is not one line
    of at most MAX_SUBJECT printable characters."""
    if not value.strip():
        return ""
    try:
        return one_line(value, field, MAX_SUBJECT)
    except Invalid as exc:
        raise ArgumentError(str(exc), code=exc.code, field=exc.field) from None


def text(value: str, field: str = "text") -> str:
    """A list's own confirmation text ('' when blank: none); ArgumentError when it is over MAX_TEXT characters or
    cannot be stored."""
    if not value.strip():
        return ""
    if len(value) > MAX_TEXT:
        raise ArgumentError(f"{field} is longer than {MAX_TEXT:,} characters", code=f"{field}.too_long", field=field)
    try:
        return body_text(value, field)
    except Invalid as exc:
        raise ArgumentError(str(exc), code=exc.code, field=exc.field) from None


def check(subject_: str, text_: str, options: tuple[str, str] = ("subject", "text")) -> None:
    """Compile the subject and text given ('': not given) in the sandbox and render them for a new sign-up;
    ArgumentError, one line, for the first refused. It runs templates: call it in a worker thread."""
    for value, where, is_text in ((subject_, options[0], False), (text_, options[1], True)):
        if not value:
            continue
        try:
            templates.check(value, where)
            made = templates.run(templates.TEXT.from_string(templates.parse(templates.TEXT, value, where)), _SIGN_UP)
        except Invalid as exc:
            raise ArgumentError(str(exc), code=exc.code, field=exc.field) from None
        except templates.RenderError as exc:
            raise ArgumentError(
                f"{where}: cannot be rendered for a new sign-up (no name, no attributes): {exc}"
            ) from None
        if is_text and _LINK not in made:
            raise ArgumentError(
                f"{where}: must show the confirmation link to every sign-up: put {LINK} in it, where the link goes"
            )


async def checked(
    subject_: str | None, text_: str | None, options: tuple[str, str] = ("subject", "text")
) -> tuple[str | None, str | None]:
    """The subject and text given, checked (None: not given, it stays; '': none), the templates in a worker
    thread; ArgumentError for the first refused."""
    given = (
        None if subject_ is None else subject(subject_, options[0]),
        None if text_ is None else text(text_, options[1]),
    )
    if given[0] or given[1]:
        await anyio.to_thread.run_sync(check, given[0] or "", given[1] or "", options)
    return given
