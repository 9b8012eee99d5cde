"""Ranking methods of `tune --rank`: Carver and Lasso interleaved (Carver first) takes the
parameters either finds, as the stack benchmark ranked them; a ranked space holds the others at
the best known config, one the space holds."""

from __future__ import annotations

import numpy as np
import pandas as pd

from stortune.datasets import from_frame
from stortune.importance import rank_dataset
from stortune.objective import Objective
from stortune.space import parse_space
from stortune.tuners.topk import top_k
from stortune.workflows.rank import (
    RankMethod,
    RankOptions,
    best_known,
    ranked_space,
    top_parameters,
)

SPACE = parse_space(
    """\
name: six
parameters:
  a: {type: int, low: 0, high: 9, default: 0}
  b: {type: int, low: 0, high: 9, default: 0}
  c: {type: int, low: 0, high: 9, default: 0}
  d: {type: int, low: 0, high: 9, default: 0}
  e: {type: categorical, values: [x, y, z], default: x}
  f: {type: categorical, values: [x, y], default: x}
"""
)


def dataset(n: int = 80, seed: int = 0):
    """a matters most, then e (a step Lasso's linear fit sees poorly), then b; c, d, f are
    noise."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "a": rng.integers(0, 10, n),
            "b": rng.integers(0, 10, n),
            "c": rng.integers(0, 10, n),
            "d": rng.integers(0, 10, n),
            "e": rng.choice(["x", "y", "z"], n),
            "f": rng.choice(["x", "y"], n),
        }
    )
    frame["bw_mbs"] = (
        100 + 8 * frame["a"] + 30 * (frame["e"] == "z") + 2 * frame["b"] + rng.normal(0, 3, n)
    )
    return from_frame(frame, metrics=["bw_mbs"])


def interleaved(data, metric: str, k: int) -> list[str]:
    """The stack benchmark's own ranking: Carver's and Lasso's top K in turns, each once."""
    carver = top_k(rank_dataset(data, "carver", metric, "top-n", k), k)
    lasso = top_k(rank_dataset(data, "lasso", metric), k)
    out: list[str] = []
    for pair in zip(carver, lasso, strict=False):
        for name in pair:
            if name not in out and name in SPACE and len(out) < k:
                out.append(name)
    return out


def test_carver_lasso_is_a_rank_option() -> None:
    assert RankOptions("carver-lasso", 3).method == RankMethod.CARVER_LASSO


def test_carver_lasso_takes_both_rankings_in_turns() -> None:
    data = dataset()
    for k in (1, 2, 3, 4):
        found = top_parameters(data, RankMethod.CARVER_LASSO, "bw_mbs", k, SPACE)
        assert found == interleaved(data, "bw_mbs", k)
        assert len(found) == k
    two = top_parameters(data, RankMethod.CARVER_LASSO, "bw_mbs", 2, SPACE)
    assert two[0] == top_parameters(data, RankMethod.CARVER, "bw_mbs", 1)[0]
    assert set(two) <= {"a", "e", "b"}


def test_a_ranked_space_holds_the_rest_at_the_best_known_config() -> None:
    data = dataset()
    objective = Objective("bw_mbs")
    ranking = ranked_space(data, SPACE, RankOptions("carver-lasso", 2), objective)
    best = best_known(data, SPACE, objective)
    assert ranking.free == top_parameters(data, RankMethod.CARVER_LASSO, "bw_mbs", 2, SPACE)
    assert ranking.held == {k: v for k, v in best.items() if k not in ranking.free}
    # the tuning starts at the best known config: the free ones' defaults are its values
    assert ranking.space.default_config() == SPACE.validate(best)
    frame = data.aggregated().frame
    assert best["a"] == frame.loc[frame["bw_mbs"].idxmax(), "a"]


def test_the_best_known_config_is_one_the_space_holds() -> None:
    frame = pd.DataFrame(
        {"a": [1, 2], "b": [0, 0], "c": [0, 0], "d": [0, 0], "e": ["w", "y"], "f": ["x", "x"]}
    )
    frame["bw_mbs"] = [200.0, 100.0]  # the best row's e=w is not a value of the space
    data = from_frame(frame, metrics=["bw_mbs"])
    assert best_known(data, SPACE, Objective("bw_mbs"))["a"] == 2
    assert best_known(data, SPACE, Objective("bw_mbs", "min"))["a"] == 2
