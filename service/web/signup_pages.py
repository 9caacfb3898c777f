"""The double opt-in pages (service/web/signup.py): a list's sign-up form, its answer, the question of a
confirmation link (one button) and its answer (templates/signup_form.html, signup_sent.html, signup_busy.html,
confirm.html, confirmed.html); a link that does not work is pages.problem's. No JavaScript, no outside
resources; labelled fields; readable on a 375 px phone. Everything shown is escaped.

A list is shown by its title, else as "the mailing list": its name is the operator's (vip-customers).
The answer to a sign-up shows the address as it was typed, with a link back to the form: it tells the person
only what they typed, and the same whatever the address's state."""

from service.web.pages import render


def form(code: str, list_title: str | None, sender: str, invalid: bool = False, email: str = "") -> str:
    return str(render("signup_form.html", code, list_title=list_title, sender=sender, invalid=invalid, email=email))


def sent(code: str, list_title: str | None, email: str, back: str) -> str:
    """The one answer to a sign-up, whatever the address's state: the address as typed, so that a typo can be
    seen, and a link `back` to the form (relative to the page's own address)."""
    return str(render("signup_sent.html", code, list_title=list_title, email=email, back=back))


def busy(code: str) -> str:
    return str(render("signup_busy.html", code))


def question(code: str, token: str, list_title: str | None, sender: str, email: str) -> str:
    return str(render("confirm.html", code, token=token, list_title=list_title, sender=sender, email=email))


def confirmed(code: str, list_title: str | None, email: str) -> str:
    return str(render("confirmed.html", code, list_title=list_title, email=email))
