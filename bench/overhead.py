"""Overhead of stortune's space machinery in a 60-parameter space, beside ConfigSpace.

Measures (1) validating 100k configs (type/range checks, conditions, constraints) and (2) drawing
10k constraint-respecting configs by Latin hypercube. The peer is ConfigSpace, the library a user
would otherwise pick for spaces with conditions and forbidden clauses: its validation of the same
configs, and its own sampler (random: it has no LHS). Both libraries must agree on which configs
are valid, or the timing means nothing; the bench checks that.

Run: python bench/overhead.py   (writes bench/results/overhead.json)
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import ConfigSpace as CS
import numpy as np
import yaml
from scipy.stats import qmc

from stortune.sampling import latin_hypercube
from stortune.space import Space, parse_space

RESULTS = Path(__file__).parent / "results" / "overhead.json"
N_VALIDATE = 100_000
N_LHS = 10_000
ORDINAL = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]


def build_space_dict() -> dict:
    """20 floats, 20 ints (half log-scaled each), 10 categoricals, 5 bools (conditional), 5
    ordinals; 8 constraints, all expressible in ConfigSpace too."""
    params: dict = {}
    for i in range(20):
        log = i >= 10
        params[f"f{i}"] = {
            "type": "float",
            "low": 1.0 if log else 0.0,
            "high": 1e6 if log else 1.0,
            "log": log,
            "default": 1000.0 if log else 0.5,
        }
    for i in range(20):
        log = i >= 10
        params[f"i{i}"] = {
            "type": "int",
            "low": 1 if log else 0,
            "high": 65536 if log else 100,
            "log": log,
            "default": 64 if log else 50,
        }
    for i in range(10):
        params[f"c{i}"] = {"type": "categorical", "values": ["a", "b", "c", "d"], "default": "a"}
    for i in range(5):
        params[f"b{i}"] = {"type": "bool", "default": True, "active_when": {f"c{i}": ["a", "b"]}}
    for i in range(5):
        params[f"o{i}"] = {"type": "ordinal", "values": ORDINAL, "default": 4096}
    constraints = [{"require": f"i{k} <= i{k + 1}"} for k in (0, 2, 4, 6, 8)]
    constraints += [
        {"require": "o0 <= o1"},
        {"require": "o2 <= o3"},
        {"forbid": "c8 == 'd' and c9 == 'd'"},
    ]
    return {"name": "overhead60", "parameters": params, "constraints": constraints}


def build_configspace() -> CS.ConfigurationSpace:
    cs = CS.ConfigurationSpace(seed=0)
    hps = {}
    for i in range(20):
        log = i >= 10
        hps[f"f{i}"] = CS.UniformFloatHyperparameter(
            f"f{i}",
            1.0 if log else 0.0,
            1e6 if log else 1.0,
            log=log,
            default_value=1000.0 if log else 0.5,
        )
        hps[f"i{i}"] = CS.UniformIntegerHyperparameter(
            f"i{i}",
            1 if log else 0,
            65536 if log else 100,
            log=log,
            default_value=64 if log else 50,
        )
    for i in range(10):
        hps[f"c{i}"] = CS.CategoricalHyperparameter(
            f"c{i}", ["a", "b", "c", "d"], default_value="a"
        )
    for i in range(5):
        hps[f"b{i}"] = CS.CategoricalHyperparameter(f"b{i}", [True, False], default_value=True)
        hps[f"o{i}"] = CS.OrdinalHyperparameter(f"o{i}", ORDINAL, default_value=4096)
    cs.add(list(hps.values()))
    cs.add([CS.InCondition(hps[f"b{i}"], hps[f"c{i}"], ["a", "b"]) for i in range(5)])
    forbidden = [
        CS.ForbiddenGreaterThanRelation(hps[f"i{k}"], hps[f"i{k + 1}"]) for k in (0, 2, 4, 6, 8)
    ]
    forbidden += [
        CS.ForbiddenGreaterThanRelation(hps["o0"], hps["o1"]),
        CS.ForbiddenGreaterThanRelation(hps["o2"], hps["o3"]),
        CS.ForbiddenAndConjunction(
            CS.ForbiddenEqualsClause(hps["c8"], "d"), CS.ForbiddenEqualsClause(hps["c9"], "d")
        ),
    ]
    cs.add(forbidden)
    return cs


def configspace_valid(cs: CS.ConfigurationSpace, values: dict) -> bool:
    try:
        CS.Configuration(cs, values=values)  # checks types, ranges, conditions, forbiddens
    except (ValueError, CS.ForbiddenValueError):
        return False
    return True


def timed(fn, *args):  # noqa: ANN001, ANN202 - a tiny timing helper
    started = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - started


def main() -> None:
    space: Space = parse_space(yaml.safe_dump(build_space_dict(), sort_keys=False), "bench")
    cs = build_configspace()
    rng = np.random.default_rng(0)
    configs = [space.decode(p) for p in rng.random((N_VALIDATE, len(space)))]

    ours, ours_s = timed(lambda: [space.is_valid(c) for c in configs])
    theirs, theirs_s = timed(lambda: [configspace_valid(cs, c) for c in configs])
    agree = sum(a == b for a, b in zip(ours, theirs, strict=True))

    design, lhs_s = timed(latin_hypercube, space, N_LHS, 0)
    _, cs_sample_s = timed(cs.sample_configuration, N_LHS)

    def raw_lhs() -> list:
        points = qmc.LatinHypercube(d=len(space), rng=np.random.default_rng(0)).random(N_LHS)
        return [c for c in (space.decode(p) for p in points) if space.first_violation(c) is None]

    raw_valid, raw_s = timed(raw_lhs)

    result = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "configspace": CS.__version__,
        },
        "space": {"parameters": len(space), "constraints": len(space.constraints)},
        "validate": {
            "configs": N_VALIDATE,
            "valid_fraction": sum(ours) / N_VALIDATE,
            "agreement_with_configspace": agree / N_VALIDATE,
            "stortune_s": ours_s,
            "configspace_s": theirs_s,
            "stortune_us_per_config": ours_s / N_VALIDATE * 1e6,
            "speed_vs_configspace": theirs_s / ours_s,
        },
        "sample": {
            "configs": N_LHS,
            "stortune_lhs_s": lhs_s,
            "lhs_rows_repaired": design.repaired,
            "lhs_rows_resampled": design.resampled,
            "configspace_random_s": cs_sample_s,
            "scipy_lhs_unrepaired_s": raw_s,
            "scipy_lhs_valid_rows": len(raw_valid),
            "speed_vs_configspace": cs_sample_s / lhs_s,
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    v, s = result["validate"], result["sample"]
    print(f"60-parameter space, {len(space.constraints)} constraints, 5 conditions")
    print(f"{'task':<34}{'stortune':>12}{'ConfigSpace':>14}{'ratio':>9}")
    print(
        f"{'validate 100k configs':<34}{v['stortune_s']:>11.2f}s{v['configspace_s']:>13.2f}s"
        f"{v['speed_vs_configspace']:>8.2f}x"
    )
    print(
        f"{'draw 10k valid configs':<34}{s['stortune_lhs_s']:>11.2f}s"
        f"{s['configspace_random_s']:>13.2f}s{s['speed_vs_configspace']:>8.2f}x"
    )
    print(
        f"  stortune: LHS, {s['lhs_rows_repaired']} rows repaired by swaps, "
        f"{s['lhs_rows_resampled']} resampled; ConfigSpace: random sampling (no LHS)"
    )
    print(
        f"  plain scipy LHS + decode, no repair: {s['scipy_lhs_unrepaired_s']:.2f}s, "
        f"only {s['scipy_lhs_valid_rows']} of {N_LHS} rows valid"
    )
    print(
        f"validity verdicts agree with ConfigSpace on {v['agreement_with_configspace']:.2%} "
        f"of configs ({v['valid_fraction']:.1%} valid)"
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
