"""Every relative link and image in README.md and docs/*.md points at a file that exists (a moved page or a
screenshot never copied from test-artifacts/ is caught here, not by a reader)."""

from __future__ import annotations

import re

import pytest

from tests.support.knowledge import ROOT

pytestmark = pytest.mark.unit

LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)  # an example in a code block is not a link
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    targets = [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert missing == [], f"{page.relative_to(ROOT)} links to missing files: {missing}"
