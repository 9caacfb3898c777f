"""The README stays the front door: at most 200 lines, and every page it links to exists (the site's own links are
checked by `mkdocs build --strict`, which does not read the README)."""

import re

from tests.conftest import ROOT

README = ROOT / "README.md"


def test_the_readme_is_at_most_200_lines() -> None:
    assert len(README.read_text().splitlines()) <= 200


def test_every_file_the_readme_links_to_exists() -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    assert len(targets) > 10
    assert sorted(t for t in targets if not t.startswith("http") and not (ROOT / t).exists()) == []


def test_the_readme_and_the_sites_home_lead_to_every_page() -> None:
    """Every page of the guide, the operations and the reference is linked from the README and from the site's
    home page, so that neither hides half of einmal."""
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").glob("*/*.md"))
    assert len(pages) > 20
    home = (ROOT / "docs" / "index.md").read_text()
    readme = README.read_text()
    assert [p for p in pages if f"(docs/{p}" not in readme] == []
    assert [p for p in pages if f"]({p}" not in home] == []
