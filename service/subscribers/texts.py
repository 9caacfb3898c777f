"""The unsubscribe page's texts, one file a language: service/subscribers/languages/<code>.toml.

A language is its code (en, de, pt-BR: the file's name) and a table of the same keys as en.toml.
Adding one is adding its file; `einmal accounts set --language` and `campaign create --language`
accept every code that has a file. A page asks for its texts by code: an unknown code falls back to
its primary language (pt-BR to pt), then to English, and a key a language lacks to English's text.
"""

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from service.errors import Invalid

VERSION = 2  # of the confirmation message's wording, in every language: a confirmation campaign keeps
# "<language>-<VERSION>" of the text it was made with (campaigns.wording), and each sign-up it sends to records it
DEFAULT = "en"
FOLDER = Path(__file__).with_name("languages")
_CODE = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{1,8})*")  # as the database's CHECK
_MAX_ACCEPT = 40  # the Accept-Language entries looked at


@dataclass(frozen=True)
class Wording:
    """The confirmation message in one language: templates of a campaign's subject and text body, with
    campaign.name (the list's), email and confirm_url (service/subscribers/languages/<language>.toml), or a list's
    own (own_wording: `digest` set)."""

    language: str
    subject: str
    body: str
    digest: str | None = None  # of a list's own subject and text: its version is "list-<digest>"

    @property
    def version(self) -> str:
        return f"list-{self.digest}" if self.digest else f"{self.language}-{VERSION}"


def _load() -> dict[str, dict[str, str]]:
    found = {}
    for path in sorted(FOLDER.glob("*.toml")):
        if _CODE.fullmatch(path.stem):
            with path.open("rb") as file:
                found[path.stem] = {key: str(value) for key, value in tomllib.load(file).items()}
    return found


LANGUAGES = _load()


def language(code: str | None) -> str:
    """The language with texts that serves `code`: itself, its primary language, else English."""
    if code in LANGUAGES:
        return code
    primary = (code or "").split("-")[0].lower()
    return primary if primary in LANGUAGES else DEFAULT


def text(code: str, key: str) -> str:
    return LANGUAGES[language(code)].get(key) or LANGUAGES[DEFAULT][key]


def confirmation(code: str | None) -> Wording:
    """The double opt-in confirmation message in the language that serves `code`."""
    found = language(code)
    return Wording(found, text(found, "confirmation_subject"), text(found, "confirmation_body"))


def checked(value: str) -> str:
    """`value` as a language code with texts; Invalid naming the ones there are."""
    code = value.strip()
    if code not in LANGUAGES:
        shown = repr(value[:40])
        raise Invalid(
            f"language {shown}: no texts for it ({', '.join(LANGUAGES)}); a language is added "
            f"as service/subscribers/languages/<code>.toml",
            code="language.unknown",
            field="language",
        )
    return code


def negotiate(header: str | None) -> str:
    """The language for a page that names no campaign (a broken link): the first in the browser's
    Accept-Language, by weight, that has texts; else English."""
    best, weight = DEFAULT, 0.0
    for entry in (header or "").split(",")[:_MAX_ACCEPT]:
        tag, _, params = entry.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:7])
            except ValueError:
                continue
        tag = tag.strip()
        code = tag if tag in LANGUAGES else tag.split("-")[0].lower()
        if code in LANGUAGES and q > weight:
            best, weight = code, q
    return best
