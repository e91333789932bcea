"""The repository's documentation stands on its own: it never sends a reader to notes the repository does not hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "m365_emulator" / "README.md"])
# Pointers to material outside this repository (the notes it was developed from).
OUTSIDE = re.compile(
    r"\.\./shared|steering|protocol notes|reference/(?:durable-protocol|audit-apis|real-api-evidence|style-anchors)\.md"
    r"|seeds/",
    re.IGNORECASE,
)


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(REPO)) for d in DOCS])
def test_documentation_points_only_at_what_the_repository_holds(doc: Path) -> None:
    found = [
        f"{doc.name}:{number}: {line.strip()[:100]}"
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == []


def test_the_readme_links_the_design() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "(docs/design.md)" in readme
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    for rule in ("replay history", "holds K", "Bounded history", "exactly-once output", "Completeness", "Throttling"):
        assert rule in design, rule
