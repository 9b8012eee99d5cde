"""The `surrogate` target: a fitted performance model answers instead of the system.

`stortune model fit ... -o FILE.joblib` saves a model; this target predicts its metric for each
applied config, so tuners can be run, compared and debugged in seconds without a machine to
measure. Optional multiplicative Gaussian noise (`noise=0.05`: 5 % standard deviation) makes
the answers vary like real runs, so repetitions and the tuners' noise handling get exercised. The
noise stream starts again from `seed` when a campaign is resumed.

The model file is a joblib pickle: load only files you trust. Its path and digest are kept in
the campaign's target spec, so `--resume` uses the same model and refuses a changed file.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stortune.errors import StortuneError, TargetError
from stortune.space import Config, Space
from stortune.targets.base import Measurement, Target, Workload


class SurrogateTarget(Target):
    kind = "surrogate"
    measures_machine = False

    def __init__(
        self,
        model_path: str | Path,
        space: Space,
        noise: float = 0.0,
        seed: int = 0,
        held: Mapping[str, Any] | None = None,
        digest: str | None = None,
    ) -> None:
        """`held`: values of model parameters the space does not tune (a resumed pinned
        campaign's space lists only the tuned ones); `digest`: refuse a model file that changed."""
        # imported here: the models pull in scikit-learn and friends, which only this target needs
        from stortune.models.surrogate import SurrogateModel

        self.path = Path(model_path).expanduser().resolve()
        if not math.isfinite(noise) or noise < 0:
            raise TargetError(f"surrogate noise must be a fraction >= 0, not {noise!r}")
        try:
            self.digest = _digest(self.path)
            if digest is not None and digest != self.digest:
                raise TargetError(
                    f"{self.path}: the model file changed since the campaign started "
                    "(start a new campaign to use the new model)"
                )
            self.model = SurrogateModel.load(self.path)
        except TargetError:
            raise
        except (StortuneError, OSError) as exc:
            raise TargetError(f"surrogate model: {_one_line(exc)}") from None
        self.space = space
        self.noise = float(noise)
        self.seed = int(seed)
        self.held = dict(held or {})
        self._full = getattr(space, "parent", space)  # a subspace holding other values
        self._check_parameters()
        self._rng = np.random.default_rng(self.seed)
        self._current: dict[str, Any] | None = None
        self._prediction = math.nan

    @classmethod
    def from_spec(cls, spec: dict[str, Any], space: Space) -> SurrogateTarget:
        return cls(
            spec["model"],
            space,
            noise=float(spec.get("noise", 0.0)),
            seed=int(spec.get("seed", 0)),
            held=spec.get("held"),
            digest=spec.get("sha256"),
        )

    def describe(self) -> dict[str, Any]:
        held = dict(self.held)
        # a pinned subspace is stored with its tuned parameters only: keep what it holds
        held.update(
            {k: v for k, v in getattr(self.space, "held", {}).items() if k in self.model.params}
        )
        spec: dict[str, Any] = {
            "kind": self.kind,
            "model": str(self.path),
            "sha256": self.digest,
            "metric": self.model.metric,
            "technique": self.model.technique,
            "noise": self.noise,
            "seed": self.seed,
        }
        if held:
            spec["held"] = held
        return spec

    def _check_parameters(self) -> None:
        """Refuse a model that was fitted on other parameters than the space tunes."""
        names = set(self._full.names) | set(self.held)
        wanted = set(self.model.params)
        missing, extra = sorted(wanted - names), sorted(names - wanted)
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"the space lacks {', '.join(missing)}")
            if extra:
                parts.append(f"the model does not know {', '.join(extra)}")
            raise TargetError(
                f"{self.path.name} ({self.model.metric} from {', '.join(self.model.params)}) "
                f"does not match space {self.space.name!r}: {'; '.join(parts)}"
            )
        encoder = self.model.estimator.encoder_
        for p in self._full.parameters:
            numeric = p.is_numeric or all(_is_number(v) for v in p.values)
            if encoder.is_numeric(p.name) and not numeric:
                raise TargetError(
                    f"{self.path.name}: parameter {p.name!r} is numeric in the model but "
                    f"takes {p.domain_text()} in space {self.space.name!r}"
                )

    def apply(self, config: Config) -> None:
        full = getattr(self.space, "full_config", None)
        values = dict(full(config) if full else self.space.validate(config))
        values = {**self.held, **values}
        # inactive (conditional) parameters have no value; the model wants one for each
        for name in self.model.params:
            if name not in values:
                values[name] = self._full[name].default if name in self._full else None
        try:
            self._current = self.model.coerce(values)
            self._prediction = self.model.predict_config(self._current)
        except StortuneError as exc:
            raise TargetError(f"surrogate model: {_one_line(exc)}") from None

    def run(self, workload: Workload | None = None, timeout: float | None = None) -> Measurement:
        if self._current is None:
            raise TargetError("the surrogate target was run before a config was applied")
        value = self._prediction
        if not math.isfinite(value):
            return Measurement.failed(f"the model predicts {value} for this config")
        if self.noise > 0:
            value *= 1.0 + self.noise * float(self._rng.standard_normal())
        return Measurement(
            {self.model.metric: value}, info={"predicted": self._prediction, "noise": self.noise}
        )


def _digest(path: Path) -> str:
    if not path.is_file():
        raise TargetError(f"{path}: no such model file (write one with `stortune model fit -o`)")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
