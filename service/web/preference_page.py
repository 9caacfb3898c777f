"""The preference page's part of the unsubscribe page (service/web/pages.py): the lists of the sender that
the address is on, each with a button that leaves it, and what the last press did.

Each list's button is a form of its own that posts to the same link with `&leave=<id>`; no JavaScript. Its
accessible name names the list ("Leave Weekly news"), its visible text is the word alone. A list is shown by
its title; one without is "Mailing list" (numbered when there are several), never its name, which is the
operator's (vip-customers). Everything shown is escaped: the titles are the operator's.
"""

import html

from service.subscribers import texts
from service.web import pages

Notice = tuple[str, str | None]  # what the last press did: the text's key (left, left_untitled, not_on_list), the
#                                  list's title


def _item(code: str, token: str, list_id: int, name: str) -> str:
    label = html.escape(texts.text(code, "leave_label").format(list=name))
    return (
        f"<li><span>{html.escape(name)}</span>\n"
        f'<form method="post" action="?token={html.escape(token)}&amp;leave={list_id}">'
        f'<button type="submit" class="leave" aria-label="{label}">{pages.say(code, "leave")}</button>'
        f"</form></li>"
    )


def notice(code: str, done: Notice | None) -> str:
    """The line that says what the last press did, announced to a screen reader (role=status)."""
    if done is None:
        return ""
    key, name = done
    return f'\n<p class="notice" role="status">{pages.say(code, key, list=html.escape(name or ""))}</p>'


def shown(code: str, lists: list[tuple[int, str | None]]) -> list[tuple[int, str]]:
    """(id, what the page calls it): its title, else "Mailing list", numbered when more than one has no title."""
    untitled = [list_id for list_id, title in lists if not title]
    word = texts.text(code, "untitled_item")
    return [
        (list_id, title or (f"{word} {untitled.index(list_id) + 1}" if len(untitled) > 1 else word))
        for list_id, title in lists
    ]


def section(
    code: str, token: str, email: str, sender: str, lists: list[tuple[int, str | None]], done: Notice | None
) -> str:
    """The lists and their buttons; nothing when the address is on no list and nothing was left."""
    parts = {"address": pages.strong(pages.mask(email)), "sender": pages.strong(sender)}
    if not lists:
        return f"\n<p>{pages.say(code, 'no_lists', **parts)}</p>" if done else ""
    items = "\n".join(_item(code, token, list_id, name) for list_id, name in shown(code, lists))
    return f"""
<section aria-labelledby="lists-heading">
<h2 id="lists-heading">{pages.say(code, "lists_heading")}</h2>
<p>{pages.say(code, "lists", **parts)}</p>
<ul class="lists">
{items}
</ul>
</section>"""
