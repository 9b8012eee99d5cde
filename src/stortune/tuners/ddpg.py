"""Deep deterministic policy gradient over whole configs, as Magpie tunes static parameters.

Magpie (IC2E '22, II-III) in stortune's terms:

* Action: every varying parameter at once, a point of [0, 1]^m, mapped to values by Magpie's
  formula (`action_value`): ``a (max - min) + min`` for continuous parameters and the same
  rounded, ``floor(. + 0.5)``, for discrete ones (categorical, ordinal and bool values by index;
  log parameters in log units).
* State: the target's system metrics (`observe_state`, client and server side where the target
  has both), each min-max normalised over the values seen so far. A target without metrics (a
  table replay) gets the last action and the last normalised objective as its state instead.
* Reward: the relative change of the normalised objective between steps (`magpie_reward`).
  The objective is min-max normalised over [v0 - |v0|, v0 + |v0|], v0 the first measured
  value, so the default scores 0.5 and the reward is the relative change Magpie describes; a
  multi-objective campaign tells the tuner its weighted scalarisation (`multiobjective`).
  Two guards Magpie does not need with its known bounds: the normalised objective is kept at
  or above 0.05 (the reward divides by it) and rewards are clipped to [-1, 1].
* Learning: actor and critic MLPs with target networks (soft updates), a FIFO replay buffer of
  limited size, a few gradient steps after each action, Gaussian or Ornstein-Uhlenbeck
  exploration noise that decays over the budget.
* The top configurations are re-measured at the end of the budget, and `best` is judged by
  each config's mean, so one lucky run does not win.
* `save`/`load` keep the agent (networks, optimisers, buffer, normalisation) for progressive
  tuning: a later campaign continues from the learned policy.

Before the actor has anything to learn from, the default config and a small Latin hypercube are
measured. A failed evaluation gets reward -1 and leaves the reference objective unchanged.
On a pool (`pool`, a measured table's rows) actions go to the nearest unmeasured row and the
random proposals are random unmeasured rows; a re-measurement that repeats its first value
exactly (a replayed table) ends the re-measuring.

Exploration beyond Magpie's noise (`ask`): every third proposal after the initial design is a
random config, and an actor whose last ten configs found nothing better (`common.stalled`) is
set aside until the best improves: its proposals alternate between random configs and moves
around the best config (its action plus Gaussian steps of `LOCAL_STEP`). The actor learns
slowly (a critic fed about ninety rewards, each comparing a config with the one before it), so
its proposals stay near where its initial weights put them; without these rules it was below
random search on a table whose good configs are a corner of 4% of the rows (exastencils).
"""

from __future__ import annotations

import io
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from stortune.enums import Direction
from stortune.errors import ConfigError, StortuneError
from stortune.inputs import MODEL_BYTES, read_bytes
from stortune.outputs import writing
from stortune.sampling import config_key
from stortune.space import Config, Kind, Parameter, Space
from stortune.torch_threads import one_torch_thread
from stortune.tuners.base import Observation, Tuner
from stortune.tuners.common import (
    initial_design,
    initial_size,
    random_valid,
    repeated_identically,
    stalled,
)
from stortune.tuners.pool import Pool
from stortune.tuners.topk import free_indices

HIDDEN = 64
BUFFER = 64
BATCH = 32
TRAIN_STEPS = 32
GAMMA = 0.5  # rewards are relative to the previous step: the near future matters most
TAU = 0.1
ACTOR_RATE, CRITIC_RATE = 1e-4, 1e-3  # the DDPG paper's: the actor follows a settled critic
ACTION_L2 = 0.1  # penalty on the actor's pre-sigmoid outputs, so actions do not saturate
NOISE_START, NOISE_END = 0.3, 0.05
MAX_METRICS = 64
FAILURE_REWARD = -1.0
MIN_OBJECTIVE = 0.05  # the reward divides by the previous objective: keep it off zero
REWARD_CLIP = 1.0  # as DQN clips rewards: one huge ratio must not swamp the critic
EXPLORE_EVERY = 3  # every third proposal after the design is a random config
LOCAL_STEP = 0.2  # spread of a move around the best config, in action units


# ---- Magpie's formulas --------------------------------------------------------------------
def action_value(p: Parameter, a: float) -> Any:
    """The value of parameter `p` for action coordinate `a` in [0, 1] (Magpie II-C-1)."""
    a = min(max(float(a), 0.0), 1.0)
    if p.kind is Kind.FLOAT:
        lo, hi = (math.log(p.low), math.log(p.high)) if p.log else (p.low, p.high)
        value = a * (hi - lo) + lo
        return float(math.exp(value) if p.log else value)
    if p.kind is Kind.INT:
        if p.log:
            value = math.exp(a * (math.log(p.high) - math.log(p.low)) + math.log(p.low))
            return int(min(max(math.floor(value + 0.5), p.low), p.high))
        return int(math.floor(a * (p.high - p.low) + p.low + 0.5))
    index = math.floor(a * (len(p.values) - 1) + 0.5)
    return p.values[index]


def value_action(p: Parameter, value: Any) -> float:
    """The action coordinate that maps back to `value` (for configs the tuner is told)."""
    if p.is_numeric:
        lo, hi, v = float(p.low), float(p.high), float(value)
        if p.log:
            lo, hi, v = math.log(lo), math.log(hi), math.log(v)
        return 0.5 if hi == lo else min(max((v - lo) / (hi - lo), 0.0), 1.0)
    if len(p.values) == 1:
        return 0.5
    index = next(i for i, x in enumerate(p.values) if p.check(value) == x)
    return index / (len(p.values) - 1)


def scalarised(state: Sequence[float], weights: Sequence[float] | None = None) -> float:
    """Magpie's weighted sum of normalised performance indicators."""
    weights = weights or [1.0] * len(state)
    return float(sum(w * s for w, s in zip(weights, state, strict=True)))


def magpie_reward(
    before: Sequence[float], after: Sequence[float], weights: Sequence[float] | None = None
) -> float:
    """r_t = (sum w_i s_{t+1}(i) - sum w_i s_t(i)) / sum w_i s_t(i)  (Magpie II-B-5)."""
    old, new = scalarised(before, weights), scalarised(after, weights)
    return (new - old) / max(abs(old), 1e-9)


def normalised_objective(value: float, reference: float, direction: str) -> float:
    """Min-max normalisation of `value` over [ref - |ref|, ref + |ref|], flipped for 'min'."""
    scale = 2.0 * (abs(reference) or 1.0)
    low = reference - scale / 2
    x = (value - low) / scale
    return x if direction == Direction.MAX else 1.0 - x


# ---- networks -------------------------------------------------------------------------------
def _mlp(n_in: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(n_in, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, n_out),
    )


class _Agent:
    """Actor, critic, their target networks and optimisers."""

    def __init__(self, state_dim: int, action_dim: int) -> None:
        self.state_dim, self.action_dim = state_dim, action_dim
        self.actor = _mlp(state_dim, action_dim)  # logits; actions are their sigmoid
        self.critic = _mlp(state_dim + action_dim, 1)
        self.actor_target = _mlp(state_dim, action_dim)
        self.critic_target = _mlp(state_dim + action_dim, 1)
        self.actor_target.load_state_dict(self.actor.state_dict())
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=ACTOR_RATE)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=CRITIC_RATE)

    def act(self, state: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits = self.actor(torch.as_tensor(state, dtype=torch.float32)[None, :])
            return torch.sigmoid(logits)[0].numpy()

    def train(self, batch: list[tuple[np.ndarray, ...]]) -> None:
        s, a, r, s2 = (
            torch.as_tensor(np.array(x), dtype=torch.float32) for x in zip(*batch, strict=True)
        )
        r = r[:, None]
        with torch.no_grad():
            next_action = torch.sigmoid(self.actor_target(s2))
            target = r + GAMMA * self.critic_target(torch.cat([s2, next_action], 1))
        critic_loss = nn.functional.mse_loss(self.critic(torch.cat([s, a], 1)), target)
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        logits = self.actor(s)
        actor_loss = -self.critic(torch.cat([s, torch.sigmoid(logits)], 1)).mean()
        actor_loss = actor_loss + ACTION_L2 * logits.pow(2).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
        for net, target_net in ((self.actor, self.actor_target), (self.critic, self.critic_target)):
            for p, q in zip(net.parameters(), target_net.parameters(), strict=True):
                q.data.mul_(1 - TAU).add_(TAU * p.data)

    def state_dict(self) -> dict[str, Any]:
        return {
            name: getattr(self, name).state_dict()
            for name in (
                "actor",
                "critic",
                "actor_target",
                "critic_target",
                "actor_opt",
                "critic_opt",
            )
        }

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        for name, value in data.items():
            getattr(self, name).load_state_dict(value)


class DDPGTuner(Tuner):
    """Magpie's DDPG agent behind ask/tell (module doc)."""

    name = "ddpg"
    takes_pool = True

    def __init__(
        self,
        space: Space,
        direction: str = "max",
        seed: int = 0,
        budget: int | None = None,
        noise: str = "gaussian",
        remeasure: int | None = None,
        pool: Sequence[Config] | None = None,
    ) -> None:
        super().__init__(space, direction, seed, budget)
        self.pool = None if pool is None else Pool(space, pool)
        if noise not in ("gaussian", "ou"):
            raise StortuneError(f"DDPG noise must be 'gaussian' or 'ou', not {noise!r}")
        self.noise = noise
        self.free = [space.parameters[i] for i in free_indices(space)]
        self.n_init = initial_size(budget, low=2, high=8)
        if remeasure is None:  # the top configs measured again: up to 3, a tenth of the budget
            remeasure = min(3, budget // 10) if budget else 0
        self.remeasure = remeasure
        self._design = initial_design(space, self.n_init, seed) if self.free else []
        self._rng = np.random.default_rng(seed)
        self._torch_seed = seed
        self._agent: _Agent | None = None
        self.buffer: deque[tuple[np.ndarray, ...]] = deque(maxlen=BUFFER)
        self._metric_names: list[str] | None = None
        self._metric_low: dict[str, float] = {}
        self._metric_high: dict[str, float] = {}
        self._pending_metrics: dict[str, float] | None = None
        self._state_raw: dict[str, float] | np.ndarray | None = None  # s_t, kept raw
        self._reference: float | None = None
        self._last_objective = 0.5
        self._last_action = np.full(len(self.free), 0.5)
        self._ou = np.zeros(len(self.free))
        self._remeasured: set[str] = set()
        self._seen: set[str] = set()

    # ---- state ----------------------------------------------------------------------------
    def observe_state(self, state: Mapping[str, float]) -> None:
        metrics = {k: float(v) for k, v in state.items() if math.isfinite(float(v))}
        if not metrics:
            return
        if self._metric_names is None:
            if self._agent is not None:
                return  # the agent was built for the action-echo state; keep it
            self._metric_names = sorted(metrics)[:MAX_METRICS]
        for k in self._metric_names:
            if k in metrics:
                self._metric_low[k] = min(self._metric_low.get(k, metrics[k]), metrics[k])
                self._metric_high[k] = max(self._metric_high.get(k, metrics[k]), metrics[k])
        self._pending_metrics = metrics

    def _current_raw_state(self) -> dict[str, float] | np.ndarray:
        """s_{t+1}: the metrics just observed, or the last action and normalised objective."""
        if self._metric_names is not None:
            if self._pending_metrics is not None:
                return dict(self._pending_metrics)
            previous = self._state_raw
            return dict(previous) if isinstance(previous, dict) else {}
        return np.concatenate([self._last_action, [self._last_objective]])

    def _state_vector(self, raw: dict[str, float] | np.ndarray | None) -> np.ndarray:
        if self._metric_names is None:
            if isinstance(raw, np.ndarray):
                return raw
            return np.concatenate([np.full(len(self.free), 0.5), [0.5]])
        raw = raw if isinstance(raw, dict) else {}
        out = []
        for k in self._metric_names:
            lo, hi = self._metric_low.get(k, 0.0), self._metric_high.get(k, 0.0)
            value = raw.get(k, lo)
            out.append(0.5 if hi == lo else (value - lo) / (hi - lo))
        return np.array(out)

    # ---- ask ------------------------------------------------------------------------------
    def ask(self) -> Config:
        if self.budget and self.remeasure and len(self.history) >= self.budget - self.remeasure:
            again = self._next_remeasure()
            if again is not None:
                return again
        design = self._next_design()
        if design is not None:
            return design
        step = len(self.history)
        if self._agent is None:
            return self._random()  # nothing learnt yet
        if stalled(self.history, self.direction) and (best := self.best) is not None:
            # the actor set aside: random configs and moves around the best, by turns
            if step % 2 == 0:
                return self._random()
            return self._near(self.action_of(best.config), self._local_step)
        if step % EXPLORE_EVERY == 0:
            return self._random()
        action = self._agent.act(self._state_vector(self._state_raw))
        return self._near(action, self._noise)

    def _near(self, centre: np.ndarray, noise: Callable[[], np.ndarray]) -> Config:
        """An unseen config (on a pool, the nearest open row) at `centre` plus `noise`; a
        random one when 50 draws break constraints or were all seen."""
        for _ in range(50):
            config = self._config_for(np.clip(centre + noise(), 0.0, 1.0))
            if config is not None and (
                self.pool is not None or config_key(config) not in self._seen
            ):
                return self._on_pool(config)
        return self._random()

    def _next_design(self) -> Config | None:
        """The initial design's next config not measured yet; on a pool, its next point moved
        to the nearest open row (the row is what is measured, so it goes by step)."""
        if self.pool is not None:
            step = len(self.history)
            return self.pool.nearest_open(self._design[step]) if step < len(self._design) else None
        return next((dict(c) for c in self._design if config_key(c) not in self._seen), None)

    def _on_pool(self, config: Config) -> Config:
        """On a pool, the open row nearest to the config; else the config."""
        return dict(config) if self.pool is None else self.pool.nearest_open(config)

    def _random(self) -> Config:
        """A random open row of the pool (a uniform config moved to its nearest row would
        favour the rows in sparsely measured regions); else a random valid unseen config."""
        if self.pool is not None:
            return self.pool.random_open(self._rng)
        return random_valid(self.space, self._rng, self._seen)

    def _local_step(self) -> np.ndarray:
        """A move around the best config: Gaussian steps of `LOCAL_STEP`."""
        return self._rng.normal(scale=LOCAL_STEP, size=len(self.free))

    def _noise(self) -> np.ndarray:
        horizon = self.budget or 100
        progress = min(len(self.history) / horizon, 1.0)
        sigma = NOISE_START + (NOISE_END - NOISE_START) * progress
        if self.noise == "ou":
            self._ou += 0.15 * -self._ou + sigma * self._rng.normal(size=len(self.free))
            return self._ou.copy()
        return self._rng.normal(scale=sigma, size=len(self.free))

    def _config_for(self, action: np.ndarray) -> Config | None:
        values = {p.name: action_value(p, a) for p, a in zip(self.free, action, strict=True)}
        try:
            return self.space.validate(values)
        except ConfigError:
            return None  # a constraint is broken: the caller draws other noise

    def action_of(self, config: Mapping[str, Any]) -> np.ndarray:
        """The action (in [0,1]^m) whose mapping is `config`."""
        return np.array([value_action(p, config.get(p.name, p.default)) for p in self.free])

    def _next_remeasure(self) -> Config | None:
        for obs in self._ranked()[: self.remeasure]:
            if obs.key not in self._remeasured:
                self._remeasured.add(obs.key)
                return dict(obs.config)
        return None

    # ---- tell -----------------------------------------------------------------------------
    def _observe(self, config: Config, value: float | None) -> None:
        self._seen.add(config_key(config))
        if self.pool is not None:
            self.pool.close(config)
        if repeated_identically(self.history):
            self.remeasure = 0  # a deterministic target: re-measuring spends the budget for nothing
        if not self.free:
            return
        action = self.action_of(config)
        previous_state = self._state_raw
        if value is None:
            reward = FAILURE_REWARD
        else:
            if self._reference is None:
                self._reference = value
            objective = max(
                normalised_objective(value, self._reference, self.direction), MIN_OBJECTIVE
            )
            reward = magpie_reward([self._last_objective], [objective])
            reward = min(max(reward, -REWARD_CLIP), REWARD_CLIP)
            self._last_objective = objective
        self._last_action = action
        self._state_raw = self._current_raw_state()
        self._pending_metrics = None
        if len(self.history) > 1:  # the first measurement only sets the reference
            self.buffer.append(
                (
                    self._state_vector(previous_state),
                    action,
                    np.float32(reward),
                    self._state_vector(self._state_raw),
                )
            )
            self._learn()

    def _learn(self) -> None:
        if self._agent is None:
            torch.manual_seed(self._torch_seed)
            state_dim = len(self._metric_names) if self._metric_names else len(self.free) + 1
            self._agent = _Agent(state_dim, len(self.free))
        if len(self.buffer) < 2:
            return
        with one_torch_thread():
            for _ in range(TRAIN_STEPS):
                picks = self._rng.choice(len(self.buffer), size=min(BATCH, len(self.buffer)))
                self._agent.train([self.buffer[i] for i in picks])

    # ---- best: means over re-measurements -------------------------------------------------
    def _ranked(self) -> list[Observation]:
        """One observation per config (its mean value), best first."""
        means = self.config_means()
        return sorted(means, key=lambda o: o.value, reverse=self.direction == Direction.MAX)

    @property
    def best(self) -> Observation | None:
        ranked = self._ranked()
        return ranked[0] if ranked else None

    # ---- progressive tuning ---------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Keep the agent for a later campaign (`load`)."""
        if self._agent is None:
            raise StortuneError("the DDPG agent has not learned anything yet; nothing to save")
        state = {
            "parameters": [p.name for p in self.free],
            "agent": self._agent.state_dict(),
            "state_dim": self._agent.state_dim,
            "buffer": [tuple(np.asarray(x).tolist() for x in t) for t in self.buffer],
            "metric_names": self._metric_names,
            "metric_low": self._metric_low,
            "metric_high": self._metric_high,
        }
        with writing(path):
            torch.save(state, Path(path))

    def load(self, path: str | Path) -> None:
        """Continue from a saved agent: its policy acts at once (no initial design)."""
        raw = read_bytes(path, "DDPG agent", MODEL_BYTES)
        try:
            data = torch.load(io.BytesIO(raw), weights_only=True)
        except Exception as exc:  # unpickling fails in many ways; the user needs the file
            raise StortuneError(f"{path}: cannot load a DDPG agent: {_first_line(exc)}") from None
        if not isinstance(data, dict) or not isinstance(data.get("parameters"), list):
            raise StortuneError(f"{path}: not a DDPG agent saved by stortune")
        names = [p.name for p in self.free]
        if data["parameters"] != names:
            raise StortuneError(
                f"{path}: the agent tuned {', '.join(data['parameters'])}, not {', '.join(names)}"
            )
        self._agent = _Agent(int(data["state_dim"]), len(self.free))
        self._agent.load_state_dict(data["agent"])
        self.buffer.clear()
        for item in data["buffer"]:
            s, a, r, s2 = (np.array(x, dtype=float) for x in item)
            self.buffer.append((s, a, np.float32(r), s2))
        self._metric_names = data["metric_names"]
        self._metric_low = dict(data["metric_low"])
        self._metric_high = dict(data["metric_high"])
        self._design = self._design[:1]  # measure the default (the reference), then act


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
