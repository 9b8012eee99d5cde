"""How far an estimated profile is from the full reference, and how much faster it came.

The error of a ratio is relative to the full profile's ratio at the same request size; the
paper judged SeRRa by these ratio errors and by the fraction of the reference's time it took.
The error is also given over the sizes where the reference shows a real asymmetry (ratio >=
`ASYMMETRIC`), and the coverage says how often the reference lies inside the estimate's
interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from stortune.errors import StortuneError
from stortune.profile.design import PATTERNS

ASYMMETRIC = 1.5  # a ratio from here on is a sequential advantage worth estimating well


def compare_profiles(estimated: Mapping[str, Any], full: Mapping[str, Any]) -> dict[str, Any]:
    """Errors of `estimated`'s ratios and access times against `full`'s, at the sizes both
    report, and the two profiles' times."""
    est_rows = {row["size"]: row for row in estimated["curve"]}
    full_rows = {row["size"]: row for row in full["curve"]}
    sizes = sorted(set(est_rows) & set(full_rows))
    if not sizes:
        raise StortuneError("the two profiles have no request size in common")
    ratio_errors = {}
    for op in ("read", "write"):
        pairs = [
            (s, est_rows[s]["ratio"][op], full_rows[s]["ratio"][op])
            for s in sizes
            if op in est_rows[s]["ratio"] and op in full_rows[s]["ratio"]
        ]
        if pairs:
            asymmetric = [pair for pair in pairs if pair[2] >= ASYMMETRIC]
            ratio_errors[op] = _errors(pairs) | {
                "estimated_mean": float(np.mean([e for _, e, _ in pairs])),
                "full_mean": float(np.mean([f for _, _, f in pairs])),
                "asymmetric_sizes": len(asymmetric),
                "asymmetric_mean_abs": _errors(asymmetric)["mean_abs"] if asymmetric else None,
                "coverage": _coverage(est_rows, full_rows, sizes, op),
            }
    access_errors = {}
    for pattern in PATTERNS:
        pairs = [
            (s, est_rows[s]["access_ms"][pattern], full_rows[s]["access_ms"][pattern])
            for s in sizes
            if pattern in est_rows[s]["access_ms"] and pattern in full_rows[s]["access_ms"]
        ]
        if pairs:
            access_errors[pattern] = _errors(pairs)
    est_time, full_time = float(estimated["elapsed_s"]), float(full["elapsed_s"])
    return {
        "sizes": len(sizes),
        "ratio_error": ratio_errors,
        "access_time_error": access_errors,
        "time": {
            "estimated_s": est_time,
            "full_s": full_time,
            "estimated_runs": estimated.get("runs"),
            "full_runs": full.get("runs"),
            "speedup": full_time / est_time if est_time > 0 else None,
        },
        "rows": [
            {
                "size": s,
                "estimated": est_rows[s]["ratio"],
                "full": full_rows[s]["ratio"],
            }
            for s in sizes
        ],
        "warnings": _warnings(estimated, full),
    }


def _coverage(
    est_rows: Mapping[int, Any], full_rows: Mapping[int, Any], sizes: list[int], op: str
) -> float | None:
    """The share of sizes whose full-profile ratio lies inside the estimate's interval."""
    inside = [
        low <= full_rows[s]["ratio"][op] <= high
        for s in sizes
        if (bounds := (est_rows[s].get("ratio_ci") or {}).get(op)) and op in full_rows[s]["ratio"]
        for low, high in [bounds]
    ]
    return sum(inside) / len(inside) if inside else None


def _errors(pairs: list[tuple[int, float, float]]) -> dict[str, float]:
    """Mean and largest absolute relative error, and the mean signed one (bias)."""
    rel = np.array([(e - f) / f for _, e, f in pairs])
    worst = int(np.argmax(np.abs(rel)))
    return {
        "mean_abs": float(np.mean(np.abs(rel))),
        "bias": float(np.mean(rel)),
        "max_abs": float(np.abs(rel[worst])),
        "max_size": pairs[worst][0],
    }


def _warnings(estimated: Mapping[str, Any], full: Mapping[str, Any]) -> list[str]:
    out = []
    if estimated.get("mode") != "estimated":
        out.append(f"the first profile is a {estimated.get('mode')} one, not an estimate")
    if full.get("mode") != "full":
        out.append(f"the second profile is an {full.get('mode')} one, not a full (--full) one")
    est_target, full_target = estimated.get("target", {}), full.get("target", {})
    for key in ("path", "file_size", "max_requests"):
        if est_target.get(key) != full_target.get(key):
            out.append(
                f"the profiles differ in {key}: {est_target.get(key)} and {full_target.get(key)}"
            )
    return out
