"""The double opt-in pages (service/web/signup.py): a list's sign-up form, its answer, the question of a
confirmation link (one button) and its answer; a link that does not work is pages.problem's. No JavaScript, no outside
resources; labelled fields; readable on a 375 px phone. Everything shown is escaped.

A list is shown by its title, else as "the mailing list": its name is the operator's (vip-customers).
The answer to a sign-up shows the address as it was typed, with a link back to the form: it tells the person
only what they typed, and the same whatever the address's state."""

import html

from service.web.pages import _page, _say, _strong, mask

FORM_STYLE = """
label { display: block; font-weight: 600; margin: 1rem 0 .25rem; }
input { font: inherit; width: 100%; box-sizing: border-box; padding: .5rem .6rem; border: 1px solid #71717a;
        border-radius: 6px; }
input:focus-visible { outline: 3px solid #1d4ed8; outline-offset: 1px; }
form button { margin-top: 1.25rem; background: #1d4ed8; }
.error { color: #b91c1c; font-weight: 600; }
"""


def _list(code: str, title: str | None) -> str:
    """The list as a page names it: its title, else a neutral wording (HTML)."""
    return _strong(title) if title else _say(code, "untitled_list")


def form(code: str, list_title: str | None, sender: str, invalid: bool = False, email: str = "") -> str:
    error = f'\n<p class="error" id="problem" role="alert">{_say(code, "signup_invalid")}</p>' if invalid else ""
    described = ' aria-describedby="problem" aria-invalid="true"' if invalid else ""
    return _page(
        code,
        "signup_title",
        f"""<h1>{_say(code, "signup_heading", list=_list(code, list_title))}</h1>
<p>{_say(code, "signup", sender=_strong(sender))}</p>{error}
<form method="post">
<label for="email">{_say(code, "signup_email")}</label>
<input id="email" name="email" type="email" required maxlength="254" autocomplete="email" \
value="{html.escape(email)}"{described}>
<label for="name">{_say(code, "signup_name")}</label>
<input id="name" name="name" type="text" maxlength="200" autocomplete="name">
<button type="submit">{_say(code, "signup_button")}</button>
</form>""",
        FORM_STYLE,
    )


def sent(code: str, list_title: str | None, email: str, back: str) -> str:
    """The one answer to a sign-up, whatever the address's state: the address as typed, so that a typo can be
    seen, and a link `back` to the form (relative to the page's own address)."""
    return _page(
        code,
        "signup_sent_title",
        f"""<h1 role="status">{_say(code, "signup_sent_title")}</h1>
<p>{_say(code, "signup_sent", address=_strong(email), list=_list(code, list_title))}</p>
<p>{_say(code, "signup_typo")} <a href="{html.escape(back)}">{_say(code, "signup_back")}</a></p>""",
    )


def busy(code: str) -> str:
    return _page(
        code, "signup_busy_title", f"<h1>{_say(code, 'signup_busy_title')}</h1>\n<p>{_say(code, 'signup_busy')}</p>"
    )


def question(code: str, token: str, list_title: str | None, sender: str, email: str) -> str:
    parts = {"address": _strong(mask(email)), "list": _list(code, list_title), "sender": _strong(sender)}
    return _page(
        code,
        "confirm_title",
        f"""<h1>{_say(code, "confirm_title")}</h1>
<p>{_say(code, "confirm_question", **parts)}</p>
<form method="post" action="?token={html.escape(token)}">
<button type="submit">{_say(code, "confirm_button")}</button>
</form>
<p class="small">{_say(code, "confirm_note")}</p>""",
        FORM_STYLE,
    )


def confirmed(code: str, list_title: str | None, email: str) -> str:
    return _page(
        code,
        "confirmed_title",
        f"""<h1 role="status">{_say(code, "confirmed_title")}</h1>
<p>{_say(code, "confirmed", address=_strong(mask(email)), list=_list(code, list_title))}</p>""",
    )
