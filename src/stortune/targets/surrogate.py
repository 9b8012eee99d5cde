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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from stortune.errors import StortuneError, TargetError
from stortune.inputs import MODEL_BYTES, read_bytes
from stortune.space import Config, Space
from stortune.targets.base import Target, TargetSettings, noise_fraction, setting
from stortune.workloads.base import Measurement


@dataclass(frozen=True)
class SurrogateSettings(TargetSettings):
    model: str = setting(
        "",
        flag="--model",
        implies=True,
        help="surrogate target: a model saved by `stortune model fit -o` "
        "(e.g. --model stortune-out/models/runs.iops.cart.joblib).",
    )
    noise: float = setting(0.0)  # multiplicative Gaussian noise, as a fraction
    seed: int = setting(0)
    held: dict[str, Any] | None = setting(None)  # values of model parameters the space pins
    sha256: str | None = setting(None)  # refuse a model file that changed
    metric: str | None = setting(None)  # what the model predicts (for reading the spec)
    technique: str | None = setting(None)


class SurrogateTarget(Target):
    kind = "surrogate"
    Settings = SurrogateSettings
    summary = "a fitted model predicts"
    measures_machine = False
    settings: SurrogateSettings

    def __init__(
        self,
        space: Space | str | None = None,
        settings: SurrogateSettings | None = None,
        **values: Any,
    ) -> None:
        """`held`: values of model parameters the space does not tune (a resumed pinned
        campaign's space lists only the tuned ones); `sha256`: refuse a model file that changed."""
        # imported here: the models pull in scikit-learn and friends, which only this target needs
        from stortune.models.surrogate import SurrogateModel

        super().__init__(space, settings, **values)
        if self.space is None:
            raise TargetError("the surrogate target needs a space (--space)")
        s = self.settings
        if not s.model:
            raise TargetError(
                "--target surrogate needs --model FILE (from `stortune model fit -o`)"
            )
        self.path = Path(s.model).expanduser().resolve()
        noise = noise_fraction(s.noise, "surrogate noise")
        try:
            self.digest = _digest(self.path)
            if s.sha256 is not None and s.sha256 != self.digest:
                raise TargetError(
                    f"{self.path}: the model file changed since the campaign started "
                    "(start a new campaign to use the new model)"
                )
            self.model = SurrogateModel.load(self.path)
        except TargetError:
            raise
        except (StortuneError, OSError) as exc:
            raise TargetError(f"surrogate model: {_one_line(exc)}") from None
        self.noise = noise
        self.seed = int(s.seed)
        self.held = dict(s.held or {})
        self._full = self.space.root  # a subspace holding other values
        self._check_parameters()
        self._rng = np.random.default_rng(self.seed)
        self._current: dict[str, Any] | None = None
        self._prediction = math.nan
        held = dict(self.held)
        # a pinned subspace is stored with its tuned parameters only: keep what it holds
        held.update({k: v for k, v in getattr(space, "held", {}).items() if k in self.model.params})
        self.settings = replace(
            s,
            model=str(self.path),
            sha256=self.digest,
            metric=self.model.metric,
            technique=self.model.technique,
            noise=self.noise,
            held=held or None,
        )

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

    def metric_names(self) -> frozenset[str]:
        """The one metric the model predicts."""
        return frozenset({self.model.metric})

    def apply(self, config: Config) -> None:
        values = dict(self.space.full_config(config))
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

    def measure(self, timeout: float | None = None, repetition: int = 0) -> Measurement:
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
    return hashlib.sha256(read_bytes(path, "model file", MODEL_BYTES, TargetError)).hexdigest()


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
