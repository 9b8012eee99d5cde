"""A fitted performance model kept on disk, to predict a metric for a config without measuring.

A tuner can use it as a `surrogate` target: `SurrogateModel.load(path).predict_config(config)`.
The file is a joblib pickle, so load only files you trust (unpickling can run code).
"""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd

from stortune.errors import ConfigError, StortuneError
from stortune.inputs import MODEL_BYTES, read_bytes
from stortune.models.base import TabularRegressor
from stortune.space import Space

FORMAT = "stortune-surrogate"
_BOOLS = {"true": 1.0, "false": 0.0}
VERSION = 1


@dataclass
class SurrogateModel:
    """A fitted estimator with what it needs to be asked about one config."""

    estimator: TabularRegressor
    params: list[str]
    metric: str
    technique: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_fit(
        cls,
        estimator: TabularRegressor,
        X: pd.DataFrame,
        metric: str,
        technique: str,
        **metadata: Any,
    ) -> SurrogateModel:
        """Wrap a fitted estimator, recording the training ranges (a tuner's natural box)."""
        ranges: dict[str, Any] = {}
        for name in X.columns:
            if estimator.encoder_.is_numeric(name):
                ranges[name] = [float(X[name].min()), float(X[name].max())]
            else:
                ranges[name] = list(estimator.encoder_.categories[name])
        return cls(
            estimator,
            list(X.columns),
            metric,
            technique,
            {"n_rows": len(X), "ranges": ranges, **metadata},
        )

    def coerce(self, config: dict[str, Any]) -> dict[str, Any]:
        """The config with each value as the model saw it: numbers for numeric parameters."""
        missing = [p for p in self.params if p not in config]
        if missing:
            raise ConfigError(f"config for the {self.metric} model lacks {', '.join(missing)}")
        return self.coerce_some(config)

    def coerce_some(self, config: dict[str, Any]) -> dict[str, Any]:
        """Like `coerce` for some of the parameters (a workload's)."""
        unknown = sorted(set(config) - set(self.params))
        if unknown:
            raise ConfigError(
                f"config for the {self.metric} model has unknown {', '.join(unknown)} "
                f"(it has {', '.join(self.params)})"
            )
        values: dict[str, Any] = {}
        for name in (p for p in self.params if p in config):
            value = config[name]
            if self.estimator.encoder_.is_numeric(name):
                if str(value).lower() in _BOOLS:  # a true/false column is numeric to the model
                    value = _BOOLS[str(value).lower()]
                try:
                    values[name] = float(value)
                except (TypeError, ValueError):
                    raise ConfigError(f"{name}={value!r}: the model expects a number") from None
            else:
                values[name] = str(value)
        return values

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        return self.estimator.predict(frame[self.params])

    def predict_config(self, config: dict[str, Any]) -> float:
        """The predicted metric for one config (a dict of parameter values)."""
        return float(self.predict(pd.DataFrame([self.coerce(config)], columns=self.params))[0])

    def predict_systems(
        self, workload: dict[str, Any], space: Space | None = None, ascending: bool = False
    ) -> pd.DataFrame:
        """Which system config for this workload: the prediction for every system config
        (every combination of the other parameters' levels: the space's full-factorial values
        when a space is given, else the categories the model was trained on), best first
        (highest, or lowest with `ascending`). `workload` gives the workload parameters; with
        a space, every one of its ``workload``-layer parameters the model uses."""
        self.coerce_some(workload)  # unknown names and non-numbers fail here, in one line
        if space is not None:
            needed = [n for n in self.params if n in space and space[n].describes_workload]
            missing = [n for n in needed if n not in workload]
            if missing:
                raise ConfigError(f"describe the whole workload: give {', '.join(missing)}")
        system = [n for n in self.params if n not in workload]
        if not system:
            raise ConfigError("every parameter is fixed by the workload: nothing to choose")
        levels: dict[str, list[Any]] = {}
        for name in system:
            if space is not None and name in space:
                levels[name] = space[name].grid()
            elif not self.estimator.encoder_.is_numeric(name):
                levels[name] = list(self.estimator.encoder_.categories[name])
            else:
                raise ConfigError(
                    f"{name} is numeric: give the space (--space) for its levels, or fix it"
                )
        configs = [
            dict(zip(system, combo, strict=True)) for combo in itertools.product(*levels.values())
        ]
        if space is not None and set(self.params) <= set(space.names):
            configs = [c for c in configs if space.is_valid(space.validate({**workload, **c}))]
            typed = space.validate(workload)
            workload = {name: typed[name] for name in workload}
        frame = pd.DataFrame([self.coerce({**workload, **c}) for c in configs], columns=self.params)
        result = pd.DataFrame(configs, columns=system)
        result[f"predicted_{self.metric}"] = self.predict(frame)
        order = result[f"predicted_{self.metric}"].sort_values(ascending=ascending).index
        return result.loc[order].reset_index(drop=True)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        joblib.dump(
            {
                "format": FORMAT,
                "version": VERSION,
                "estimator": self.estimator,
                "params": self.params,
                "metric": self.metric,
                "technique": self.technique,
                "metadata": self.metadata,
            },
            path,
        )
        return path

    @classmethod
    def load(cls, path: str | Path) -> SurrogateModel:
        path = Path(path)
        if not path.exists():
            raise StortuneError(f"{path}: no such model file")
        raw = read_bytes(path, "model file", MODEL_BYTES)
        try:
            data = joblib.load(io.BytesIO(raw))
        except Exception as exc:  # unpickling fails in many ways; the user needs the file
            raise StortuneError(f"{path}: not a stortune model file ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise StortuneError(f"{path}: not a stortune model file")
        if data.get("version") != VERSION:
            raise StortuneError(f"{path}: model file version {data.get('version')}, need {VERSION}")
        return cls(
            data["estimator"], data["params"], data["metric"], data["technique"], data["metadata"]
        )
