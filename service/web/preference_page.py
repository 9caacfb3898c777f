"""The preference page's part of the unsubscribe page (service/web/pages.py): the lists of the sender that
the address is on, each with a button that leaves it, and what the last press did (templates/preferences.html,
notice.html).

Each list's button is a form of its own that posts to the same link with `&leave=<id>`; no JavaScript. Its
accessible name names the list ("Leave Weekly news"), its visible text is the word alone. A list is shown by
its title; one without is "Mailing list" (numbered when there are several), never its name, which is the
operator's (vip-customers). Everything shown is escaped: the titles are the operator's.
"""

from service.subscribers import texts
from service.web import pages

Notice = tuple[str, str | None]  # what the last press did: the text's key (left, left_untitled, not_on_list), the
#                                  list's title


def notice(code: str, done: Notice | None) -> str:
    """The line that says what the last press did, announced to a screen reader (role=status)."""
    key, name = done if done is not None else (None, None)
    return str(pages.render("notice.html", code, key=key, name=name))


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
    return str(
        pages.render(
            "preferences.html",
            code,
            token=token,
            lists=shown(code, lists),
            done=done is not None,
            email=email,
            sender=sender,
        )
    )
