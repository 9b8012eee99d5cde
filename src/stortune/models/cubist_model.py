"""Cubist rule-based model trees (paper, 3.5) through the optional, GPL-3 `cubist` package.

It is an extra (`pip install 'stortune[cubist]'`) so that the default install stays free of
GPL code; the import happens only when a Cubist model is fitted.

A Cubist fit is almost all committee building (about 10 ms per member on 900 rows of redis),
and the split search fits the same folds at hundreds of points. Two knobs do not need a fit of
their own. Committee member m is built on targets adjusted by members 0..m-1 only, so a model
with C members holds every smaller committee as its first members. Neighbours change no rule:
they only switch on the instance-based correction at prediction time, whose settings are in
the model's header. So one fit per (data, n_rules) with the most members asked for so far and
neighbours on (`CommitteeFit`) serves every (committees, neighbors) by narrowing its model
text; the tests check the narrowed models against direct fits, text and predictions.
"""

from __future__ import annotations

import importlib.util
import re
import zlib
from typing import Any

import numpy as np
import pandas as pd

from stortune.errors import StortuneError
from stortune.models.base import TabularRegressor
from stortune.models.memo import FitMemo, data_key

MISSING_MESSAGE = "Cubist needs the optional extra: pip install 'stortune[cubist]' (GPL-3)"


def cubist_available() -> bool:
    return importlib.util.find_spec("cubist") is not None


def _cubist_class() -> Any:
    try:
        from cubist import Cubist
    except ImportError:
        raise StortuneError(MISSING_MESSAGE) from None
    return Cubist


class CubistModel(TabularRegressor):
    """Cubist with the paper's three knobs (Table 2).

    * `n_rules` (the paper's nsplits, R's `rules`): most rules the model may have.
    * `committees` (ntrees): boosting-like committee members whose predictions are averaged.
    * `neighbors` (ninstances): training points used for instance-based correction; 0 is off.
    """

    def __init__(
        self, n_rules: int = 100, committees: int = 1, neighbors: int = 0, random_state: int = 0
    ) -> None:
        self.n_rules = n_rules
        self.committees = committees
        self.neighbors = neighbors
        self.random_state = random_state

    def _fit_encoded(self, Z: np.ndarray, y: np.ndarray) -> None:
        n_rules = max(1, int(round(self.n_rules)))
        committees = max(1, int(round(self.committees)))
        neighbors = int(round(self.neighbors))
        if not 0 <= neighbors <= MOST_NEIGHBORS:
            raise ValueError(f"neighbors must be 0..{MOST_NEIGHBORS}, got {neighbors}")
        if committees > MOST_COMMITTEES:
            raise ValueError(f"committees must be 1..{MOST_COMMITTEES}, got {committees}")
        fit = CommitteeFit.of(Z, y, n_rules, committees, int(self.random_state))
        self.model_ = fit.narrowed(committees, neighbors)

    def shared_fit_order(self, params: dict[str, Any]) -> tuple[float, ...]:
        """Sort key for a round of points (`crossval.round_errors`): per `n_rules`, the most
        committees first, whose fit then serves the rest of the round."""
        knobs = {**self.get_params(), **params}
        return (float(knobs["random_state"]), float(knobs["n_rules"]), -float(knobs["committees"]))

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        """`Cubist.predict` without its per-call table formatting: the search predicts the same
        held-out fold at every point, so the fold's Cubist text is made once (`_cases`)."""
        from cubist.cubist import _predictions  # the C entry point Cubist.predict calls

        model = self.model_
        predictions, output = _predictions(
            _cases(Z),
            zlib.decompress(model._names_string),
            zlib.decompress(model._data_string),
            model.model_.encode(),
            np.zeros(len(Z)),
            b"1",
        )
        message = output.decode()
        if "***" in message or "Error" in message:
            raise StortuneError(f"Cubist could not predict: {message.strip()}")
        return predictions


MOST_COMMITTEES = 100  # Cubist's own limits
MOST_NEIGHBORS = 9
# The header's instance settings, as a fit with neighbours on writes them.
_INSTANCES = re.compile(r'insts="1" nn="\d+" (maxd="[^"]*" )')


class CommitteeFit:
    """One Cubist fit on (Z, y) with neighbours on, and every smaller committee it holds."""

    _memo: FitMemo[CommitteeFit] = FitMemo()

    def __init__(
        self, Z: np.ndarray, y: np.ndarray, n_rules: int, committees: int, random_state: int
    ) -> None:
        self.cubist = _cubist_class()(
            n_rules=n_rules, n_committees=committees, neighbors=1, random_state=random_state
        ).fit(_named(Z), y)
        lines = self.cubist.model_.rstrip("\n").split("\n")
        starts = [i for i, line in enumerate(lines) if line.startswith('rules="')]
        # The header ends with the member count, after the committee's error reduction.
        self.header = lines[: starts[0] - 1]
        ends = starts[1:] + [len(lines)]
        self.members = ["\n".join(lines[a:b]) for a, b in zip(starts, ends, strict=True)]
        settings = [i for i, line in enumerate(self.header) if _INSTANCES.search(line)]
        if len(self.members) != committees or len(settings) != 1:
            raise StortuneError(f"unexpected Cubist {self.cubist.version_} model layout")
        self.settings_line = settings[0]

    @property
    def committees(self) -> int:
        """Members held: every committee up to this size is served."""
        return len(self.members)

    @classmethod
    def of(
        cls, Z: np.ndarray, y: np.ndarray, n_rules: int, committees: int, random_state: int
    ) -> CommitteeFit:
        """A memoised fit with at least `committees` members; a larger one replaces it."""
        key = (*data_key(Z, y), n_rules, random_state)
        known = cls._memo.get(key)
        if known is not None and known.committees >= committees:
            return known
        return cls._memo.put(key, cls(Z, y, n_rules, committees, random_state))

    def narrowed(self, committees: int, neighbors: int) -> Any:
        """A fitted `cubist.Cubist` that predicts as a direct fit with these knobs would.

        It carries what prediction needs (model text, names, data); the parsed summaries of
        a direct fit (`coeffs_`, `splits_`, ...) and the committee's error reduction, which
        only the training printout reports, are left out.
        """
        header = list(self.header)
        instances = f'insts="1" nn="{neighbors}" \\1' if neighbors else 'insts="0" '
        header[self.settings_line] = _INSTANCES.sub(instances, header[self.settings_line])
        text = "\n".join([*header, f'entries="{committees}"', *self.members[:committees], ""])
        deep = self.cubist
        model = _cubist_class()(
            n_rules=deep.n_rules,
            n_committees=committees,
            neighbors=neighbors or None,
            random_state=deep.random_state,
        )
        model.model_ = text
        model.feature_names_in_ = deep.feature_names_in_
        model.n_features_in_ = deep.n_features_in_
        model.n_outputs_ = deep.n_outputs_
        model.is_sample_weighted_ = deep.is_sample_weighted_
        model._names_string = deep._names_string
        # Without neighbours a direct fit keeps no training data for prediction.
        model._data_string = deep._data_string if neighbors else zlib.compress(b"1")
        return model


_CASES_KEPT: FitMemo[bytes] = FitMemo()


def _cases(Z: np.ndarray) -> bytes:
    """Rows to predict in Cubist's data format, memoised per table."""
    key = data_key(Z, np.empty(0))
    text = _CASES_KEPT.get(key)
    if text is None:
        from cubist._make_data_string import _make_data_string

        text = _CASES_KEPT.put(key, _make_data_string(_named(Z)).encode())
    return text


def _named(Z: np.ndarray) -> pd.DataFrame:
    """Plain column names: Cubist names its own from a table and warns when predict has none."""
    return pd.DataFrame(Z, columns=[f"x{i}" for i in range(Z.shape[1])])
