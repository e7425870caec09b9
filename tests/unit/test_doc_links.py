"""Relative links in the README and docs/ lead somewhere: the file exists, and so does the
heading a `#fragment` names (GitHub's anchor: lower case, punctuation dropped, spaces -> '-')."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    {ROOT / "README.md", ROOT / "deploy" / "README.md"}
    | {*ROOT.glob("docs/*.md"), *ROOT.glob("bench/*.md")}
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown page (a repeated heading gets -1, -2, ...)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text().splitlines():
        fenced ^= line.startswith("```")
        heading = re.match(r"#+\s+(.*)", line)
        if fenced or heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def test_the_anchor_rule_matches_githubs_on_a_heading_with_code_and_a_path() -> None:
    page = ROOT / "docs" / "benchmark.md"
    assert "replicas-benchreplicaspy" in anchors(page)  # "## Replicas (`bench/replicas.py`)"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    broken = []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, fragment = target.partition("#")
            dest = (page.parent / path) if path else page
            if not dest.exists():
                broken.append(f"{number}: {target} (no such file)")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                broken.append(f"{number}: {target} (no such heading)")
    assert broken == []
