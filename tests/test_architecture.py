"""The shape of the code, checked: one place puts a campaign together."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CAMPAIGNS = REPO / "src" / "stortune" / "measure" / "campaigns.py"


def calls_of(path: Path, name: str) -> list[int]:
    """Lines where `path` calls `name(...)` (a bare name or an attribute)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called == name:
                lines.append(node.lineno)
    return lines


def test_only_open_campaign_builds_a_measuring() -> None:
    """A start is a resume with no runs: every caller stores a spec and opens it with
    `open_campaign`, so a new campaign and a resumed one cannot drift apart."""
    builders = {
        f"{path.relative_to(REPO)}:{line}"
        for folder in ("src", "bench")
        for path in (REPO / folder).rglob("*.py")
        if path != CAMPAIGNS
        for line in calls_of(path, "Measuring")
    }
    assert builders == set()
    assert len(calls_of(CAMPAIGNS, "Measuring")) == 1
