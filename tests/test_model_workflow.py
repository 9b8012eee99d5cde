"""`workflows.model` without the command line: fit, save, predict, and the small-sample size."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stortune.errors import StortuneError
from stortune.workflows import model as workflow


@pytest.fixture
def data(tmp_path) -> workflow.TrainingData:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"bs": rng.integers(1, 33, 40) * 4, "depth": rng.integers(1, 17, 40)})
    frame["iops"] = 1000 + 30 * frame["bs"] + 50 * frame["depth"]
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    return workflow.training_data(str(path), "iops", str(tmp_path / "store.db"), None, False)


def test_fit_saves_a_model_that_predicts(data, tmp_path) -> None:
    settings = workflow.search_settings(4, 5, 10, 5, 60.0, 1)
    result = workflow.fit_models(data, ["linear"], settings, tmp_path / "models")
    (fitted,) = result.models
    assert fitted.to_dict()["cv_rmse"] < 1e-6 and fitted.stop_reason == ""
    assert result.to_dict()["models"][0]["path"].endswith("runs.iops.linear.joblib")
    surrogate = workflow.load_model(fitted.path)
    prediction = workflow.predict(surrogate, workflow.parse_config(["bs=8,depth=2"]))
    assert prediction.prediction == pytest.approx(1000 + 240 + 100)
    candidates = tmp_path / "candidates.csv"
    pd.DataFrame({"bs": [4, 8], "depth": [1, 1], "note": ["a", "b"]}).to_csv(candidates)
    rows = workflow.predict_file(surrogate, candidates, None).to_dict()["rows"]
    assert [r["predicted_iops"] for r in rows] == pytest.approx([1170, 1290])


def test_train_size_reads_rows_or_a_multiple_of_the_parameters() -> None:
    assert workflow.train_size("2N", 3, 40, "x") == 6
    assert workflow.train_size("30", 3, 40, "x") == 30
    with pytest.raises(StortuneError, match="train on 2 to 39"):
        workflow.train_size("40", 3, 40, "x")
