"""The small HTML pages of the unsubscribe link: the question, the answer, "already unsubscribed",
and a link that does not work, in the language the page is for (service/subscribers/texts.py).

No JavaScript and no outside resources: one form with one button, which posts the RFC 8058 body to
the same URL. Everything shown is escaped: the texts, and what goes into them (the subject and the
sender's name are the operator's, the address the subscriber's).
"""

import html
from email.utils import parseaddr

from service.subscribers import texts

STYLE = """
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; background: #f4f4f5; color: #18181b; }
main { max-width: 32rem; margin: 4rem auto; padding: 2rem; background: #fff; border-radius: 8px;
       box-shadow: 0 1px 3px rgba(0, 0, 0, .15); overflow-wrap: anywhere; }
@media (max-width: 36rem) { main { margin: 1rem; padding: 1.25rem; } }
h1 { font-size: 1.5rem; margin-top: 0; }
button { font: inherit; font-weight: 600; padding: .6rem 1.4rem; border: 0; border-radius: 6px;
         background: #b91c1c; color: #fff; cursor: pointer; }
button:focus-visible, a:focus-visible { outline: 3px solid #1d4ed8; outline-offset: 2px; }
a { color: #1d4ed8; }
.small { color: #52525b; font-size: .875rem; }
h2 { font-size: 1.2rem; margin-top: 2rem; }
.lists { list-style: none; padding: 0; margin: 0 0 1rem; }
.lists li { display: flex; align-items: center; justify-content: space-between; gap: 1rem;
            padding: .5rem 0; border-top: 1px solid #e4e4e7; }
.lists li:last-child { border-bottom: 1px solid #e4e4e7; }
.lists span { min-width: 0; }
.lists form { margin: 0; flex: none; }
button.leave { background: #fff; color: #b91c1c; border: 2px solid #b91c1c; padding: .4rem 1rem; }
.notice { background: #ecfdf5; border-left: 4px solid #047857; padding: .5rem .75rem; }
"""

Next = tuple[str, str | None]  # a next step: the text's key (next_contact, next_mailto, next_generic), the address


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


def _say(code: str, key: str, **parts: str) -> str:
    """The text `key` of the language, escaped, with `parts` (HTML already) in its placeholders."""
    return html.escape(texts.text(code, key), quote=False).format(**parts)


def _strong(value: str) -> str:
    return f"<strong>{html.escape(value)}</strong>"


say, strong = _say, _strong  # for the parts of pages made elsewhere (service/web/preference_page.py)


def _mailto(address: str) -> str:
    return f'<a href="mailto:{html.escape(address)}">{html.escape(address)}</a>'


def _page(code: str, title_key: str, body: str, style: str = "") -> str:
    return _document(texts.language(code), _say(code, title_key), body, style)


def _document(code: str, title: str, body: str, style: str = "") -> str:
    return (
        f'<!doctype html>\n<html lang="{html.escape(code)}">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="robots" content="noindex">\n<title>{title}</title>\n'
        f"<style>{STYLE}{style}</style>\n</head>\n<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def question(
    code: str, token: str, email: str, sender: str, subject: str | None, lists: str = "", notice: str = ""
) -> str:
    """The question, with the preference page's `lists` after its button and the `notice` of what the last
    press did under its heading (service/web/preference_page.py)."""
    received = f"\n<p>{_say(code, 'subject', subject=_strong(subject))}</p>" if subject else ""
    return _page(
        code,
        "question_title",
        f"""<h1>{_say(code, "question_title")}</h1>{notice}
<p>{_say(code, "question", sender=_strong(sender), address=_strong(mask(email)))}</p>{received}
<form method="post" action="?token={html.escape(token)}">
<input type="hidden" name="List-Unsubscribe" value="One-Click">
<button type="submit">{_say(code, "button")}</button>
</form>
<p class="small">{_say(code, "question_note")}</p>{lists}""",
    )


def confirmation(code: str, email: str, sender: str) -> str:
    return _page(
        code,
        "done_title",
        f"""<h1 role="status">{_say(code, "done_heading")}</h1>
<p>{_say(code, "done", address=_strong(mask(email)), sender=_strong(sender))}</p>
<p class="small">{_say(code, "done_note")}</p>""",
    )


def already(code: str, email: str, sender: str, contact: str | None) -> str:
    """A revisit after the address was suppressed: it says so and asks nothing."""
    further = f'\n<p class="small">{_say(code, "next_contact", contact=_mailto(contact))}</p>' if contact else ""
    return _page(
        code,
        "already_title",
        f"""<h1 role="status">{_say(code, "already_heading")}</h1>
<p>{_say(code, "already", address=_strong(mask(email)), sender=_strong(sender))}</p>{further}""",
    )


def problem(code: str, key: str, next_step: Next | None = None) -> str:
    """A link that does not work (`key`: invalid, unknown, not_applied, unavailable, test), with what to
    do instead."""
    further = ""
    if next_step is not None:
        step, address = next_step
        further = f"\n<p>{_say(code, step, contact=_mailto(address) if address else '')}</p>"
    return _page(code, f"{key}_title", f"<h1>{_say(code, f'{key}_title')}</h1>\n<p>{_say(code, key)}</p>{further}")


def plain(title: str, text: str) -> str:
    """A page for what only a program meets (a body too large, a bad form), in English."""
    return _document("en", html.escape(title), f"<h1>{html.escape(title)}</h1>\n<p>{html.escape(text)}</p>")
