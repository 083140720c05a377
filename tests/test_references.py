"""Every document and path the code and docs cite exists in the repository.

Code and docs cite the Esper reference by chapter and section ("Esper ref. 14.3.5"), the
repository's own docs (``docs/architecture.md``) and its files by path; never documents
that are not in the repository (the design notes, the private reference texts by number).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = ("app", "operators", "schemas", "tests", "docs", "deploy", "helm", "examples")
SOURCES = [p for top in TOP for p in (ROOT / top).rglob("*")
           if p.suffix in (".py", ".md", ".lark", ".yaml", ".tpl", ".toml")
           and "__pycache__" not in p.parts and p.is_file()
           and "scenarios" not in p.parts]
SOURCES += [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml"]

PRIVATE = re.compile(r"\b00[0-4] §|\bARCHITECTURE\.md\b|\bnotes/[a-z-]+\.md\b")
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(TOP) + r")/[\w./-]*[\w/])")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _cited_paths(text: str) -> set[str]:
    out = set()
    for m in PATH.finditer(text):
        path = m.group(1).rstrip(".")
        if any(c in path for c in "*<>{}$") or "..." in path:
            continue
        if not re.search(r"\.\w+$|/$", path):
            continue  # a path names a file (with its extension) or a folder (with a slash)
        out.add(path)
    return out


def test_no_citation_of_documents_outside_the_repository() -> None:
    found = []
    for p in SOURCES:
        if p == Path(__file__):
            continue
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if PRIVATE.search(line):
                found.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []


def test_every_cited_repository_path_exists() -> None:
    missing = []
    for p in SOURCES:
        text = p.read_text(errors="replace")
        for path in _cited_paths(text):
            if not (ROOT / path).exists() and not (ROOT / path.rstrip("/")).exists():
                missing.append(f"{p.relative_to(ROOT)}: {path}")
    assert missing == []


def test_every_markdown_link_resolves() -> None:
    missing = []
    for p in SOURCES:
        if p.suffix != ".md":
            continue
        for target in LINK.findall(p.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (p.parent / target).exists():
                missing.append(f"{p.relative_to(ROOT)}: {target}")
    assert missing == []
