"""Render cost: microseconds per message for the bench's ~4 KB campaign, rendered in this process.

`python -m bench.render` prints the figures alone; `make bench` prints them with the others.
"""

import sys
import timeit

from pydantic import SecretStr

from bench.send import body
from service.mail.render import CampaignTemplate
from service.settings import Settings

# a body using what a simple merge field cannot: a conditional, an attribute with a default, a filter
_JINJA_HEAD = (
    '{% if attributes.plan == "pro" %}Thanks for being a Pro subscriber, {{ name | title }}!'
    '{% else %}Hello {{ name | default("there", true) }},{% endif %}\n'
    'News for {{ attributes.city | default("your town") }} in {{ campaign.name }}.\n'
)


def campaigns() -> dict[str, dict]:
    text = body()
    common = {"id": 1, "account_id": 1, "name": "bench", "from_address": "Bench <bench@example.org>", "body_html": None}
    return {
        "merge fields only": common | {"subject": "News for {{ name }}", "body_text": text},
        "jinja: if, filters, attributes": common
        | {
            "subject": "News for {{ attributes.city | default('you') }}",
            "body_text": _JINJA_HEAD + text.split("\n", 1)[1] + "{{ unsubscribe_url }}\n",
        },
        "html with 10 links, untracked": common | {"subject": "News", "body_text": text, "body_html": _linked(text)},
        "html with 10 links, clicks tracked": common
        | {"subject": "News", "body_text": text, "body_html": _linked(text), "track_clicks": True},
    }


def _linked(text: str) -> str:
    """An HTML body of the text's lines with ten links in it (a newsletter's), one a paragraph."""
    lines = text.splitlines()
    return (
        "<html><body>\n"
        + "\n".join(
            f'<p>{line} <a href="https://example.org/story/{n}?utm_source=news&amp;utm_medium=email">more</a></p>'
            if n < 10
            else f"<p>{line}</p>"
            for n, line in enumerate(lines)
        )
        + "\n</body></html>\n"
    )


def microseconds(campaign: dict, number: int = 2000) -> float:
    settings = Settings(
        unsubscribe_url="https://example.org/u",
        unsubscribe_secret=SecretStr("bench"),
        click_url="https://example.org/c",
    )
    template = CampaignTemplate.compile(campaign, settings)
    attributes = '{"city": "Berlin", "plan": "pro"}'
    try:

        def one() -> bytes:
            return template.render(7, "jane@example.org", "Jane Doe", attributes)

        one()
    except TypeError:  # a render without attributes

        def one() -> bytes:
            return template.render(7, "jane@example.org", "Jane Doe")

    return min(timeit.repeat(one, number=number, repeat=5)) / number * 1e6


def figures() -> list[tuple[str, float | None]]:
    """(template kind, µs per message), None where this build cannot render that kind."""
    result = []
    for kind, campaign in campaigns().items():
        try:
            result.append((kind, microseconds(campaign)))
        except Exception:
            result.append((kind, None))
    return result


def main() -> int:
    for kind, us in figures():
        print(f"render, {kind}: " + ("not supported" if us is None else f"{us:.1f} µs/message"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
