"""Main effects beside the noise: strong parameters stand out, null ones do not."""

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from stortune.cli import app
from stortune.datasets import from_frame
from stortune.effects import main_effects
from stortune.importance.synthetic import NULL, STRONG, additive_dataset


def test_strong_parameters_lead_and_null_ones_stay_within_noise() -> None:
    table = main_effects(additive_dataset(1500, seed=4))
    order = [e.parameter for e in table.effects]
    assert set(order[:2]) == set(STRONG)
    by_name = {e.parameter: e for e in table.effects}
    assert all(by_name[s].p_value < 1e-6 for s in STRONG)
    assert sum(by_name[n].p_value < 0.01 for n in NULL) <= 1  # chance alone, at most one
    assert by_name["block_kb"].best == "8" and by_name["block_kb"].worst == "1"


def test_means_spread_and_repeat_rsd_match_a_hand_computation() -> None:
    frame = pd.DataFrame(
        {
            "fs": ["ext4", "ext4", "xfs", "xfs", "xfs"],
            "metric.mbs": [100.0, 110.0, 50.0, 60.0, 55.0],
        }
    )
    table = main_effects(from_frame(frame))
    effect = table.effects[0]
    assert effect.means == {"ext4": 105.0, "xfs": 55.0}
    assert effect.spread == pytest.approx(105 / 55)
    assert effect.best == "ext4" and effect.runs == {"ext4": 2, "xfs": 3}
    rsd_ext4 = pd.Series([100.0, 110.0]).std() / 105
    rsd_xfs = pd.Series([50.0, 60.0, 55.0]).std() / 55
    assert table.repeat_rsd == pytest.approx((rsd_ext4 + rsd_xfs) / 2)
    assert table.configs == 2 and table.runs == 5


def test_effects_command_prints_markdown_and_json(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    additive_dataset(300, seed=1).frame.to_csv(path, index=False)
    result = CliRunner().invoke(app, ["effects", "--from", str(path), "--markdown"])
    assert result.exit_code == 0, result.output
    assert "| parameter | mean per value | spread (best/worst) |" in result.output
    data = json.loads(CliRunner().invoke(app, ["effects", "--from", str(path), "--json"]).output)
    assert {e["parameter"] for e in data["effects"][:2]} == set(STRONG)
