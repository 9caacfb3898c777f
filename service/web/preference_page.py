"""The preference page's part of the unsubscribe page (service/web/pages.py): the lists of the sender that
the address is on, each with a button that leaves it, and what the last press did.

Each list's button is a form of its own that posts to the same link with `&leave=<id>`; no JavaScript. Its
accessible name names the list ("Leave Weekly news"), its visible text is the word alone. Everything shown
is escaped: the list names are the operator's.
"""

import html

from service.web import pages, texts

Notice = tuple[str, str | None]  # what the last press did: the text's key (left, not_on_list), the list's name


def _item(code: str, token: str, list_id: int, name: str) -> str:
    label = html.escape(texts.text(code, "leave_label").format(list=name))
    return (f'<li><span>{html.escape(name)}</span>\n'
            f'<form method="post" action="?token={html.escape(token)}&amp;leave={list_id}">'
            f'<button type="submit" class="leave" aria-label="{label}">{pages.say(code, "leave")}</button>'
            f'</form></li>')


def notice(code: str, done: Notice | None) -> str:
    """The line that says what the last press did, announced to a screen reader (role=status)."""
    if done is None:
        return ""
    key, name = done
    return f'\n<p class="notice" role="status">{pages.say(code, key, list=html.escape(name or ""))}</p>'


def section(code: str, token: str, email: str, sender: str, lists: list[tuple[int, str]],
            done: Notice | None) -> str:
    """The lists and their buttons; nothing when the address is on no list and nothing was left."""
    parts = {"address": pages.strong(pages.mask(email)), "sender": pages.strong(sender)}
    if not lists:
        return f"\n<p>{pages.say(code, 'no_lists', **parts)}</p>" if done else ""
    items = "\n".join(_item(code, token, list_id, name) for list_id, name in lists)
    return f"""
<section aria-labelledby="lists-heading">
<h2 id="lists-heading">{pages.say(code, 'lists_heading')}</h2>
<p>{pages.say(code, 'lists', **parts)}</p>
<ul class="lists">
{items}
</ul>
</section>"""
