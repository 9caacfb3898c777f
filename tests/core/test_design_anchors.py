"""Code cites docs/design.md by its sections' stable anchors (`docs/design.md#liveness`), never by number: every
anchor cited exists, and no citation by section number is left, but an RFC's."""

import re

from tests.conftest import ROOT

CITING = [
    *(
        p
        for folder in ("service", "actors", "sql", "tests", "bench", "docs", "config")
        for p in ROOT.glob(f"{folder}/**/*")
    ),
    ROOT / "README.md",
]


def texts():
    for path in CITING:
        if path.is_file() and path.suffix in {".py", ".sql", ".md", ".example", ".toml"}:
            yield path.relative_to(ROOT), path.read_text()


def anchors() -> set[str]:
    design = (ROOT / "docs" / "design.md").read_text()
    named = set(re.findall(r"\{#([\w-]+)\}", design))
    for title in re.findall(r"^#+ (.*?)(?: \{#[\w-]+\})?$", design, re.M):
        named.add(re.sub(r"[^\w\- ]", "", title.lower()).strip().replace(" ", "-"))
    return named


def test_every_cited_anchor_of_the_design_exists() -> None:
    known = anchors()
    cited = set()
    for path, text in texts():
        for chain in re.findall(r"design\.md(#[\w-]+(?:(?:, | and )#[\w-]+)*)", text):
            cited |= {(str(path), anchor) for anchor in re.findall(r"#([\w-]+)", chain)}
    assert len(cited) > 50
    assert sorted((path, anchor) for path, anchor in cited if anchor not in known) == []


def test_no_section_is_cited_by_its_number() -> None:
    numbered = re.compile(r"(?<!RFC \d{4} )§\d+(?!\.\d|\d)")  # RFC 8463 §1 is an RFC's; §3.2 a subsection
    assert [f"{path}: {m[0]}" for path, text in texts() for m in numbered.finditer(text)] == []
