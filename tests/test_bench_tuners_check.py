"""The tuners bench's default-tuner check: a gap is called within noise only when the seeds'
spread allows it, for the best at a budget and for the evaluations to 1% alike."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
table = importlib.import_module("tuners_table")


def campaign(tuner: str, seed: int, reached_at: int) -> dict:
    """A noise-free campaign at 0.9 of the optimum from the first evaluation, within 1% from
    `reached_at` (101: never)."""
    improved = [[1, 0.9]] + ([[reached_at, 1.0]] if reached_at <= table.BUDGET else [])
    return {"dataset": "d", "tuner": tuner, "seed": seed, "noise": 0.0, "improved": improved,
            "ask_seconds_100obs": 0.1, "recommended": {}}  # fmt: skip


def check(mine: list[int], peer: list[int]) -> dict:
    runs = [campaign("bo", s, n) for s, n in enumerate(mine)]
    runs += [campaign("tpe", s, n) for s, n in enumerate(peer)]
    rows = table.summarise(runs, ["d"], ["bo", "tpe"], {})
    return table.default_check(rows, "bo")


def test_more_than_1_5x_the_peers_evaluations_is_within_noise_only_when_the_seeds_spread() -> None:
    steady = check([9] * 20, [3] * 20)  # 3x on every seed: beyond any spread
    assert steady["within_1_5x_of_best_peer"] == 0 and steady["within_1_5x_or_noise"] == 0
    assert "d: 9 evaluations to 1% against tpe's 3 (tpe ahead beyond noise)" in steady["misses"]
    # the peer's median is 2.5 from a lucky half of its seeds; the other half needs 20
    lucky = check([9] * 20, [2] * 10 + [3] + [20] * 9)
    assert lucky["within_1_5x_of_best_peer"] == 0 and lucky["within_1_5x_or_noise"] == 1
    assert "d: 9 evaluations to 1% against tpe's 2.5 (within noise)" in lucky["misses"]
    close = check([4] * 20, [3] * 20)  # within 1.5x: no note at all
    assert close["within_1_5x_of_best_peer"] == close["within_1_5x_or_noise"] == 1


def test_a_seed_that_never_reaches_1pct_counts_as_one_past_the_budget() -> None:
    rows = table.summarise([campaign("bo", 0, 101), campaign("bo", 1, 5)], ["d"], ["bo"], {})
    assert rows[0]["evals_to_1pct_seeds"] == [table.BUDGET + 1, 5]
