"""Ask/tell bridge to a peer tuner (HEBO or SMAC3), run with the peers' own virtualenv.

The peers pin versions stortune cannot share (HEBO wants numpy < 1.25), so bench/peer_tuners.py
runs them in bench/peers/.venv as ``PEER_PYTHON bench/peers/bridge.py {hebo|smac}`` and talks to
this script over stdin/stdout, one JSON object per line:

  {"op": "init", "seed": 0, "direction": "max", "budget": 100, "params": [...]}  -> {"ok": true}
  {"op": "ask"}                                          -> {"config": {name: value}}
  {"op": "tell", "config": {...}, "value": 1.5}          -> {"ok": true}
  {"op": "quit"}                                         -> (exits)

A parameter is {"name", "type": "int", "low", "high"[, "log"]}, {"name", "type": "float", "low",
"high", "log"} or {"name", "type": "cat", "values": [str, ...]}; one with a single value is a
constant, kept out of the peer's space. A told config may be one the peer never proposed (the
caller measured the nearest config of a pool instead): the peer learns it all the same. A value
of null is a failed evaluation, told as the worst value seen so far (skipped before any). Any
error is answered with {"error": "..."} and the bridge goes on.

Only the peer venv's packages and the standard library are imported: not stortune. Stdout is the
protocol, so everything else the peers print (logs, warnings, even from C) goes to stderr.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import sys
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, TextIO

Params = list[dict[str, Any]]
Values = dict[str, Any]


def _claim_stdout() -> TextIO:
    """The protocol's stream: the original stdout; file descriptor 1 then points at stderr."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol


def _is_constant(p: dict[str, Any]) -> bool:
    return len(p["values"]) == 1 if p["type"] == "cat" else p["low"] == p["high"]


def _constant(p: dict[str, Any]) -> Any:
    return p["values"][0] if p["type"] == "cat" else p["low"]


def _value(p: dict[str, Any], raw: Any) -> Any:
    """A peer's value as plain JSON: ints rounded, floats kept in range (HEBO's log scale can
    step just outside), categories as text."""
    if p["type"] == "cat":
        return str(raw)
    if p["type"] == "int":
        return min(max(int(round(float(raw))), int(p["low"])), int(p["high"]))
    return min(max(float(raw), float(p["low"])), float(p["high"]))


def _checked(p: dict[str, Any], raw: Any) -> Any:
    """A told value, or ValueError saying why it is not in the parameter's domain."""
    if p["type"] == "cat":
        if raw not in p["values"]:
            raise ValueError(f"{p['name']}: {raw!r} is not one of {p['values']}")
        return raw
    number = int(raw) if p["type"] == "int" else float(raw)
    if number != raw or not p["low"] <= number <= p["high"]:
        kind = "an integer" if p["type"] == "int" else "a number"
        raise ValueError(f"{p['name']}: {raw!r} is not {kind} in [{p['low']}, {p['high']}]")
    return number


class Peer(ABC):
    """What both peers share: constants, maximised values as costs, failures as worst costs."""

    def __init__(self, params: Params, direction: str) -> None:
        self.free = [p for p in params if not _is_constant(p)]
        if not self.free:
            raise ValueError("every parameter is a constant: nothing to tune")
        self.constants = {p["name"]: _constant(p) for p in params if _is_constant(p)}
        self.sign = -1.0 if direction == "max" else 1.0  # both peers minimise
        self.worst: float | None = None

    def ask(self) -> Values:
        return {**self.constants, **self._ask()}

    def tell(self, config: Values, value: float | None) -> None:
        missing = [p["name"] for p in self.free if p["name"] not in config]
        if missing:
            raise ValueError(f"told config lacks {', '.join(missing)}")
        if value is None:
            if self.worst is None:
                return
            cost = self.worst
        else:
            cost = self.sign * float(value)
            self.worst = cost if self.worst is None else max(self.worst, cost)
        self._tell({p["name"]: _checked(p, config[p["name"]]) for p in self.free}, cost)

    @abstractmethod
    def _ask(self) -> Values:
        """The peer's next proposal over the free parameters."""

    @abstractmethod
    def _tell(self, config: Values, cost: float) -> None:
        """Teach the peer a config of free parameters and its cost (to minimise)."""

    def close(self) -> None:  # noqa: B027
        """Release what the peer holds outside the process."""


class Hebo(Peer):
    """HEBO as shipped: its GP with MACE, a Sobol start of 1 + dimensions points."""

    def __init__(self, params: Params, direction: str, seed: int) -> None:
        super().__init__(params, direction)
        import numpy as np
        import pandas as pd
        import torch
        from hebo.design_space.design_space import DesignSpace
        from hebo.optimizers.hebo import HEBO

        # HEBO draws from the global generators: seeding them makes a run repeatable.
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        self.np, self.pd = np, pd
        space = DesignSpace().parse([_hebo_param(p) for p in self.free])
        self.optimizer = HEBO(space, scramble_seed=seed)

    def _ask(self) -> Values:
        row = self.optimizer.suggest(n_suggestions=1).iloc[0]
        return {p["name"]: _value(p, row[p["name"]]) for p in self.free}

    def _tell(self, config: Values, cost: float) -> None:
        self.optimizer.observe(self.pd.DataFrame([config]), self.np.array([[cost]]))


def _hebo_param(p: dict[str, Any]) -> dict[str, Any]:
    if p["type"] == "cat":
        return {"name": p["name"], "type": "cat", "categories": list(p["values"])}
    kinds = {("int", False): "int", ("int", True): "pow_int"}
    kinds |= {("float", False): "num", ("float", True): "pow"}
    kind = kinds[(p["type"], bool(p.get("log", False)))]
    return {"name": p["name"], "type": kind, "lb": p["low"], "ub": p["high"]}


class Smac(Peer):
    """SMAC3's hyperparameter-optimisation facade (random forest, log-EI), deterministic."""

    def __init__(self, params: Params, direction: str, seed: int, budget: int) -> None:
        super().__init__(params, direction)
        from ConfigSpace import Categorical, ConfigurationSpace, Float, Integer
        from smac import HyperparameterOptimizationFacade, Scenario

        space = ConfigurationSpace(seed=seed)
        for p in self.free:
            if p["type"] == "cat":
                space.add(Categorical(p["name"], p["values"]))
            else:
                kind = Integer if p["type"] == "int" else Float
                space.add(kind(p["name"], (p["low"], p["high"]), log=bool(p.get("log", False))))
        self.space = space
        self.folder = tempfile.mkdtemp(prefix="smac-bridge-")  # SMAC insists on writing one
        scenario = Scenario(
            space,
            deterministic=True,
            n_trials=budget,
            seed=seed,
            output_directory=Path(self.folder) / "run",
        )
        self.smac = HyperparameterOptimizationFacade(
            scenario, _not_called, overwrite=True, logging_level=logging.WARNING
        )
        self.pending: dict[str, Any] = {}  # asked trials by config, until told
        # Deterministic: SMAC runs every config on one seed. Told configs take it too, so that
        # its intensifier compares them with the incumbent; told before any ask, they set it
        # (SMAC adopts the seed of the trials it finds in its run history).
        self.trial_seed = seed

    def _ask(self) -> Values:
        info = self.smac.ask()
        self.trial_seed = info.seed
        config = {p["name"]: _value(p, info.config[p["name"]]) for p in self.free}
        self.pending[_key(config)] = info
        return config

    def _tell(self, config: Values, cost: float) -> None:
        """The asked trial of this config, or a trial of the config as told. An asked trial
        told another config stays running in SMAC's run history: its model learns only
        finished trials and its intensifier skips running ones, so later asks are unaffected."""
        from ConfigSpace import Configuration
        from smac.runhistory.dataclasses import TrialInfo, TrialValue

        info = self.pending.pop(_key(config), None)
        if info is None:
            told = Configuration(self.space, values=config, origin="told")
            info = TrialInfo(told, seed=self.trial_seed)
        self.smac.tell(info, TrialValue(cost=cost), save=False)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _not_called(config: Any, seed: int = 0) -> float:
    raise RuntimeError("the bridge only asks and tells: SMAC never runs a target itself")


def _key(config: Values) -> str:
    return json.dumps(config, sort_keys=True)


def _make_peer(name: str, request: dict[str, Any]) -> Peer:
    seed, direction = int(request["seed"]), request["direction"]
    if direction not in ("max", "min"):
        raise ValueError(f"direction must be max or min, not {direction!r}")
    if name == "hebo":
        return Hebo(request["params"], direction, seed)
    return Smac(request["params"], direction, seed, int(request["budget"]))


def serve(name: str, requests: TextIO, replies: TextIO) -> None:
    """Answer requests until quit or end of input."""
    peer: Peer | None = None
    try:
        for line in requests:
            try:
                request = json.loads(line)
                op = request.get("op")
                if op == "quit":
                    return
                if op == "init":
                    if peer is not None:
                        raise ValueError("init was already sent")
                    peer = _make_peer(name, request)
                    reply: dict[str, Any] = {"ok": True}
                elif peer is None:
                    raise ValueError(f"{op!r} before init")
                elif op == "ask":
                    reply = {"config": peer.ask()}
                elif op == "tell":
                    peer.tell(request["config"], request["value"])
                    reply = {"ok": True}
                else:
                    raise ValueError(f"unknown op {op!r}")
            except Exception as exc:  # the caller gets every error as a reply
                logging.getLogger("bridge").exception("request failed: %s", line.strip())
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            replies.write(json.dumps(reply) + "\n")
    finally:
        if peer is not None:
            peer.close()


def main() -> None:
    replies = _claim_stdout()
    if len(sys.argv) != 2 or sys.argv[1] not in ("hebo", "smac"):
        replies.write(json.dumps({"error": "usage: bridge.py {hebo|smac}"}) + "\n")
        sys.exit(2)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    serve(sys.argv[1], sys.stdin, replies)


if __name__ == "__main__":
    main()
