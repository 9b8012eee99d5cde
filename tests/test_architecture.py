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


def project_files(folder: Path) -> list[Path]:
    """The Python files under `folder` that are the project's: not those of a hidden folder (the
    peers' virtualenv bench/tuners.py makes under bench/peers/.venv)."""
    return [
        path
        for path in folder.rglob("*.py")
        if not any(part.startswith(".") for part in path.relative_to(REPO).parts)
    ]


def test_only_open_campaign_builds_a_measuring() -> None:
    """A start is a resume with no runs: every caller stores a spec and opens it with
    `open_campaign`, so a new campaign and a resumed one cannot drift apart."""
    builders = {
        f"{path.relative_to(REPO)}:{line}"
        for folder in ("src", "bench")
        for path in project_files(REPO / folder)
        if path != CAMPAIGNS
        for line in calls_of(path, "Measuring")
    }
    assert builders == set()
    assert len(calls_of(CAMPAIGNS, "Measuring")) == 1


# the lower layers and what they may never import: the engine, the workflows, the command line
# and the report sit above them
LOWER = ("space", "system", "ceph", "workloads", "targets")
ABOVE = ("measure", "workflows", "cli", "report")
PACKAGE = REPO / "src" / "stortune"


def imported_modules(path: Path) -> set[str]:
    """Every stortune module `path` imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m.startswith("stortune.")}


def test_lower_layers_never_import_the_engine_above_them() -> None:
    upward = {
        f"{path.relative_to(PACKAGE)} imports {module}"
        for layer in LOWER
        for path in (PACKAGE / layer).rglob("*.py")
        for module in imported_modules(path)
        if module.split(".")[1] in ABOVE
    }
    assert upward == set()


def test_the_system_package_talks_to_the_machine_only() -> None:
    """system/ is the bottom: it may use errors, units and values, nothing that knows of spaces,
    targets or workloads."""
    allowed = {"system", "errors", "units", "values"}
    reaching = {
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in (PACKAGE / "system").rglob("*.py")
        for module in imported_modules(path)
        if module.split(".")[1] not in allowed
    }
    assert reaching == set()


def test_values_import_nothing_of_stortune() -> None:
    """`stortune.values` is for every layer, system/ included, so it stands on nothing."""
    assert imported_modules(PACKAGE / "values.py") == set()


def test_the_walk_sees_an_upward_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from stortune.measure.runner import Runner\n")
    assert "stortune.measure.runner" in imported_modules(sample)
