"""The public pages: the unsubscribe link's question, answer, "already unsubscribed" and a link that does not
work (templates/unsubscribe.html, unsubscribed.html, already.html, problem.html), in the language the page is
for (service/subscribers/texts.py); service/web/signup_pages.py and preference_page.py render theirs here too.

No JavaScript and no outside resources: one form with one button, which posts the RFC 8058 body to the same
URL. Everything shown is escaped: the templates autoescape every value (the subject and the sender's name are
the operator's, the address the subscriber's), and `say` escapes the texts and puts only HTML into them.
"""

import html
from collections.abc import Callable
from email.utils import parseaddr
from functools import partial

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from service.subscribers import texts

Next = tuple[str, str | None]  # a next step: the text's key (next_contact, next_mailto, next_generic), the address


def _escaped(value: object) -> object:
    """Every value a template prints, escaped as html.escape does (&quot; and &#x27; for the quotes) unless it
    is HTML already: autoescape's own would write &#34; and &#39;."""
    return value if hasattr(value, "__html__") else Markup(html.escape(str(value)))


PAGES = Environment(
    loader=PackageLoader("service.web", "templates"),
    autoescape=True,
    finalize=_escaped,
    undefined=StrictUndefined,
    keep_trailing_newline=True,
)


def say(code: str, key: str, **parts: object) -> Markup:
    """The text `key` of the language, escaped, with `parts` in its placeholders: HTML as it is, any other
    value escaped."""
    shown = {name: part if isinstance(part, Markup) else html.escape(str(part)) for name, part in parts.items()}
    return Markup(html.escape(texts.text(code, key), quote=False).format(**shown))


def render(template: str, code: str, **values: object) -> Markup:
    """A template in the language `code`: `say` says that language's texts, `lang` names it."""
    return Markup(
        PAGES.get_template(template).render(
            values, say=partial(say, code), lang=texts.language(code), mask=mask, leave_label=_leave_label(code)
        )
    )


def _leave_label(code: str) -> Callable[[str], str]:
    return lambda name: texts.text(code, "leave_label").format(list=name)


def sender(code: str, display_name: str | None, from_address: str | None) -> str:
    """Whom a page names as the sender: the account's display name, else the From name of the message (else
    its From address), else "the sender"; never the account's name, which is the operator's."""
    if display_name:
        return display_name
    name, address = parseaddr(from_address or "")
    return name or address or texts.text(code, "the_sender")


def mask(email: str) -> str:
    """j***@example.org: enough to recognise one's own address, not to read someone else's."""
    local, at, domain = email.rpartition("@")
    if not at:
        return email[:1] + "***"
    return f"{local[:1]}***@{domain}"


def question(
    code: str, token: str, email: str, sender: str, subject: str | None, lists: str = "", notice: str = ""
) -> str:
    """The question, with the preference page's `lists` after its button and the `notice` of what the last
    press did under its heading (HTML, service/web/preference_page.py)."""
    return str(
        render(
            "unsubscribe.html",
            code,
            token=token,
            email=email,
            sender=sender,
            subject=subject,
            lists=Markup(lists),
            notice=Markup(notice),
        )
    )


def confirmation(code: str, email: str, sender: str) -> str:
    return str(render("unsubscribed.html", code, email=email, sender=sender))


def already(code: str, email: str, sender: str, contact: str | None) -> str:
    """A revisit after the address was suppressed: it says so and asks nothing."""
    return str(render("already.html", code, email=email, sender=sender, contact=contact))


def problem(code: str, key: str, next_step: Next | None = None) -> str:
    """A link that does not work (`key`: invalid, unknown, not_applied, unavailable, test), with what to
    do instead."""
    step, address = next_step if next_step is not None else (None, None)
    return str(render("problem.html", code, key=key, step=step, address=address))


def plain(title: str, text: str) -> str:
    """A page for what only a program meets (a body too large, a bad form), in English."""
    return str(render("plain.html", "en", title=title, text=text))
