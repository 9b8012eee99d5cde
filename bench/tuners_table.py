"""The tuners bench's output (bench/tuners.py): a row per dataset and tuner summarised from the
finished campaigns, the default-tuner check and the Markdown table.

A helper module, not a benchmark: running it does nothing.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable, Sequence

BUDGET = 100
BUDGETS = (10, 20, 30, 100)
SMALL = (10, 20, 30)  # the budgets storage users tune with: the default must not lose there
RECOMMEND_AT = (30, 100)
EXACT = 1 - 1e-9  # a fraction this close to 1 is the optimum itself


def curve_of(run: dict) -> list[float]:
    """The best-so-far fraction after each of the BUDGET evaluations."""
    curve, steps = [], iter(run["improved"])
    step, value = next(steps), 0.0
    for evaluation in range(1, BUDGET + 1):
        while step is not None and step[0] <= evaluation:
            value = step[1]
            step = next(steps, None)
        curve.append(value)
    return curve


def to_reach(run: dict, goal: float) -> float:
    """Evaluations until the best-so-far fraction reaches `goal` (inf: never)."""
    return next((int(e) for e, f in run["improved"] if f >= goal), math.inf)


def median_or_none(values: Iterable[float]) -> float | None:
    m = statistics.median(values)
    return None if math.isinf(m) else m


def summarise(runs: list[dict], datasets: list[str], tuners: list[str], missing: dict) -> list:
    """One row per dataset x tuner."""
    rows = []
    for dataset in datasets:
        for name in tuners:
            clean = [
                r for r in runs if (r["dataset"], r["tuner"], r["noise"]) == (dataset, name, 0)
            ]
            noisy = [
                r for r in runs if (r["dataset"], r["tuner"]) == (dataset, name) and r["noise"]
            ]
            row: dict = {"dataset": dataset, "tuner": name, "seeds": len(clean)}
            if name in missing:
                row["not_installed"] = missing[name]
            if clean:
                curves = [curve_of(r) for r in sorted(clean, key=by_seed)]
                for b in BUDGETS:
                    row[f"best_at_{b}"] = statistics.median(c[b - 1] for c in curves)
                    row[f"best_at_{b}_seeds"] = [c[b - 1] for c in curves]
                row["evals_to_5pct"] = median_or_none(to_reach(r, 0.95) for r in clean)
                row["evals_to_1pct"] = median_or_none(to_reach(r, 0.99) for r in clean)
                row["evals_to_1pct_seeds"] = [  # never reached: one past the budget
                    min(to_reach(r, 0.99), BUDGET + 1) for r in sorted(clean, key=by_seed)
                ]
                row["exact_share"] = sum(c[-1] >= EXACT for c in curves) / len(clean)
                row["ask_seconds_100obs"] = statistics.median(
                    r["ask_seconds_100obs"] for r in clean
                )
            row["noisy_seeds"] = len(noisy)
            for at in RECOMMEND_AT:
                values = [r["recommended"][str(at)] for r in sorted(noisy, key=by_seed)]
                row[f"noisy_true_at_{at}"] = statistics.median(values) if values else None
                row[f"noisy_true_at_{at}_seeds"] = values
            rows.append(row)
    return rows


def by_seed(run: dict) -> int:
    return run["seed"]


def ahead_beyond_noise(theirs: Sequence[float], mine: Sequence[float], confidence=0.9) -> bool:
    """Whether `theirs` has a higher median than `mine` beyond the spread of the seeds: the
    bootstrap interval (seeded, 2,000 resamples of each side's seeds) of the difference of
    medians lies above 0. Seeds of a noisy campaign spread widely (one draw can crown a
    mediocre config), so a higher median over 20 seeds is not by itself a better tuner."""
    if len(theirs) < 2 or len(mine) < 2:
        return False  # one seed has no spread to be beyond
    rng = random.Random(0)
    differences = sorted(
        statistics.median(rng.choices(theirs, k=len(theirs)))
        - statistics.median(rng.choices(mine, k=len(mine)))
        for _ in range(2000)
    )
    return differences[int((1 - confidence) / 2 * len(differences))] > 0


def leader(peers: Sequence[dict], key: str) -> dict | None:
    """The peer with the highest `key` (None: no peer has it)."""
    return max((r for r in peers if r.get(key) is not None), key=lambda r: r[key], default=None)


def ahead_of(mine: dict, peers: Sequence[dict], key: str) -> list[str]:
    """The peers whose per-seed `key` is ahead of `mine`'s beyond the seeds' spread."""
    return [
        r["tuner"]
        for r in peers
        if r.get(f"{key}_seeds")
        and ahead_beyond_noise(r[f"{key}_seeds"], mine.get(f"{key}_seeds") or [])
    ]


def slower_beyond_noise(mine: dict, peers: Sequence[dict], factor: float) -> list[str]:
    """The peers that `mine` needs more than `factor` times the evaluations to 1% of, beyond
    the seeds' spread: the bootstrap interval of mine's median minus `factor` times theirs
    lies above 0 (`ahead_beyond_noise` on the negated counts; a seed that never got there
    counts as one past the budget). Over 20 seeds the median of a count that a lucky first
    draw ends at 2 moves by several evaluations by chance."""
    own = [-x for x in mine.get("evals_to_1pct_seeds") or []]
    return [
        r["tuner"]
        for r in peers
        if r.get("evals_to_1pct_seeds")
        and ahead_beyond_noise([-factor * x for x in r["evals_to_1pct_seeds"]], own)
    ]


def noise_verdict(beyond: Sequence[str]) -> str:
    return f"{', '.join(beyond)} ahead beyond noise" if beyond else "within noise"


def rank_value(row: dict | None, key: str) -> float:
    """Evaluations to a mark, with "not reached" and "not run" ranked last."""
    if row is None or row.get(key) is None:
        return math.inf
    return row[key]


def default_check(rows: list[dict], default: str, min_seeds: int = 1) -> dict:
    """The default tuner against every peer that ran at `min_seeds` seeds or more (module doc),
    in the noisy comparison against those whose noisy campaigns did: a median over one seed
    beside medians over twenty is a draw, not a rank."""
    by = {
        (r["dataset"], r["tuner"]): r
        for r in rows
        if r.get("seeds") and (r["tuner"] == default or r["seeds"] >= min_seeds)
    }
    datasets = sorted({d for d, _ in by}, key=[r["dataset"] for r in rows].index)
    wins, within, within_close, noisy_ok, noisy_close, notes = 0, 0, 0, 0, 0, []
    compared = 0
    small = {at: 0 for at in SMALL}  # datasets where the default is within 1% of the best peer
    small_close = {at: 0 for at in SMALL}  # ... or no peer is ahead beyond the seeds' spread
    for dataset in datasets:
        mine = by.get((dataset, default))
        peers = [r for (d, t), r in by.items() if d == dataset and t != default]
        if mine is None or not peers:
            continue
        compared += 1
        for at in SMALL:
            key = f"best_at_{at}"
            top = leader(peers, key)
            if top is None or (mine.get(key) or 0.0) >= 0.99 * top[key]:
                small[at] += 1
                small_close[at] += 1
                continue
            beyond = ahead_of(mine, peers, key)
            small_close[at] += not beyond
            notes.append(
                f"{dataset}: best at {at} {mine[key]:.3f} against {top['tuner']}'s "
                f"{top[key]:.3f} ({noise_verdict(beyond)})"
            )
        own = rank_value(mine, "evals_to_1pct")
        best_peer = min(peers, key=lambda r: rank_value(r, "evals_to_1pct"))
        peer_best = rank_value(best_peer, "evals_to_1pct")
        if own <= peer_best:
            wins += 1
        if own <= 1.5 * peer_best or (math.isinf(own) and math.isinf(peer_best)):
            within += 1
            within_close += 1
        else:
            beyond = slower_beyond_noise(mine, peers, 1.5)
            within_close += not beyond
            notes.append(
                f"{dataset}: {own:g} evaluations to 1% against {best_peer['tuner']}'s "
                f"{peer_best:g} ({noise_verdict(beyond)})"
            )
        ok, close = True, True
        noisy_peers = [r for r in peers if (r.get("noisy_seeds") or 0) >= min_seeds]
        for at in RECOMMEND_AT:
            key = f"noisy_true_at_{at}"
            top = leader(noisy_peers, key)
            if mine.get(key) is None or top is None or mine[key] >= top[key]:
                continue
            ok = False
            beyond = ahead_of(mine, noisy_peers, key)
            close = close and not beyond
            notes.append(
                f"{dataset}: noisy recommendation at {at} {mine[key]:.3f} against "
                f"{top['tuner']}'s {top[key]:.3f} ({noise_verdict(beyond)})"
            )
        noisy_ok += ok
        noisy_close += close
    return {
        "default_tuner": default,
        "datasets": compared,
        "fewest_evals_to_1pct": wins,
        "within_1_5x_of_best_peer": within,
        "within_1_5x_or_noise": within_close,
        "noisy_best_or_tied": noisy_ok,
        "noisy_best_or_within_noise": noisy_close,
        **{f"within_1pct_at_{at}": n for at, n in small.items()},
        **{f"within_1pct_or_noise_at_{at}": n for at, n in small_close.items()},
        "ask_seconds_100obs": max(
            (r["ask_seconds_100obs"] for (_, t), r in by.items() if t == default), default=None
        ),
        "met": compared > 0
        and small[30] == compared
        and wins >= math.ceil(0.7 * compared)
        and within == compared
        and noisy_close >= math.ceil(0.8 * compared),
        "peers_at_fewer_seeds": sorted(
            {r["tuner"] for r in rows if r.get("seeds") and r["tuner"] != default}
            - {t for _, t in by}
        ),
        "noisy_peers_at_fewer_seeds": sorted(  # left out of the noisy comparison only
            {
                t
                for (_, t), r in by.items()
                if t != default and (r.get("noisy_seeds") or 0) < min_seeds
            }
        ),
        "misses": notes,
    }


def against_random(rows: list[dict], own: list[str], budget: int = BUDGET) -> dict:
    """Per own tuner (random search aside), the datasets where its median best after `budget`
    noise-free evaluations is below random search's, and those where random search is ahead
    beyond the spread of the seeds (`ahead_beyond_noise`): a surrogate stuck in one region
    shows as the second; a tuner no better than random, on a table with little to learn, as
    the first about half the time."""
    key = f"best_at_{budget}"
    by = {(r["dataset"], r["tuner"]): r for r in rows if r.get(key) is not None}
    out = {}
    for name in own:
        if name == "random" or not any(t == name for _, t in by):
            continue
        below, beyond = [], []
        for (dataset, tuner), mine in by.items():
            theirs = by.get((dataset, "random"))
            if tuner != name or theirs is None or mine[key] >= theirs[key]:
                continue
            below.append(f"{dataset}: {mine[key]:.3f} against {theirs[key]:.3f}")
            if ahead_beyond_noise(theirs[f"{key}_seeds"], mine[f"{key}_seeds"]):
                beyond.append(dataset)
        out[name] = {"below": below, "below_beyond_noise": beyond}
    return out


def evidence_pick(rows: list[dict], own: list[str], min_seeds: int = 1) -> tuple[str | None, dict]:
    """Each of stortune's own tuners checked as if it were the default, and the one that
    passes most: fewest evaluations to 1%, within 1.5x of the best peer, best noisy
    recommendation, counted over the datasets (ties: fewer misses listed)."""
    checks = {
        t: default_check(rows, t, min_seeds) for t in own if any(r["tuner"] == t for r in rows)
    }
    if not checks:
        return None, {}

    def passes(c: dict) -> tuple[int, int]:
        score = c["fewest_evals_to_1pct"] + c["within_1_5x_of_best_peer"]
        score += c["noisy_best_or_within_noise"]
        score += c["within_1pct_at_30"]
        return score, -len(c["misses"])

    summary = {t: {k: v for k, v in c.items() if k != "misses"} for t, c in checks.items()}
    return max(checks, key=lambda t: passes(checks[t])), summary


def cell(value: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if value is None else fmt.format(value)


def markdown(rows: list[dict], noise: float) -> str:
    lines = [
        "Medians over the seeds given (noise-free / noisy). Noise-free: best found as a fraction "
        "of the optimum after 10/20/30/100 evaluations, evaluations to within 5% and 1% (- not "
        "reached in 100), share of seeds that found the optimum. Noisy "
        f"({noise:.0%} relative SD): true value of the recommendation after 30 and 100 "
        "evaluations. s/ask: seconds per proposal at about 100 observations.",
        "",
        "| dataset | tuner | seeds | @10 | @20 | @30 | @100 | to 5% | to 1% | optimum "
        "| noisy @30 | noisy @100 | s/ask |",
        "| --- " * 13 + "|",
    ]
    label = None
    for row in rows:
        name = row["dataset"] if row["dataset"] != label else ""
        label = row["dataset"]
        if "not_installed" in row and not row["seeds"]:
            lines.append(f"| {name} | {row['tuner']} | not installed: {row['not_installed']} |")
            continue
        if not row["seeds"]:
            lines.append(f"| {name} | {row['tuner']} | no campaign finished yet |")
            continue
        lines.append(
            f"| {name} | {row['tuner']} | {row['seeds']}/{row['noisy_seeds']} "
            f"| {cell(row['best_at_10'])} | {cell(row.get('best_at_20'))} "
            f"| {cell(row['best_at_30'])} "
            f"| {cell(row['best_at_100'])} | {cell(row['evals_to_5pct'], '{:g}')} "
            f"| {cell(row['evals_to_1pct'], '{:g}')} | {row['exact_share']:.0%} "
            f"| {cell(row['noisy_true_at_30'])} | {cell(row['noisy_true_at_100'])} "
            f"| {row['ask_seconds_100obs']:.2f} |"
        )
    return "\n".join(lines)
