from pathlib import Path

import pandas as pd
import pytest
from conftest import SHARED_DATASETS

from stortune.datasets import design_matrix, load_dataset
from stortune.errors import DatasetError
from stortune.space import Kind, space_from_dataset

ARFF = """@relation sample
% a comment
@attribute threads numeric
@attribute engine {inno,myisam}
@attribute performance numeric
@data
4,inno,100.5
8,myisam,150
"""


def test_arff_last_attribute_is_the_metric(tmp_path: Path) -> None:
    path = tmp_path / "s.arff"
    path.write_text(ARFF)
    ds = load_dataset(path)
    assert ds.params == ["threads", "engine"] and ds.metrics == ["performance"]
    assert ds.y().tolist() == [100.5, 150.0] and ds.direction() == "max"


def test_moot_suffixes_give_metrics_and_directions(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    pd.DataFrame({"a": [1, 2], "Lat-": [3.0, 4.0], "Thr+": [5.0, 6.0]}).to_csv(path, index=False)
    ds = load_dataset(path)
    assert ds.metrics == ["Lat", "Thr"]
    assert ds.direction("Lat") == "min" and ds.direction("Thr") == "max"


def test_stortune_exports_know_their_metrics_directions(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text(
        "run.trial,fs,metric.total.bw_mbs_rel,metric.dblog.write.iops,metric.read.lat_p99_ms,"
        "metric.sys.cached_mb\n0,ext4,1.0,100,2.0,30\n1,xfs,1.1,90,2.5,31\n"
    )
    data = load_dataset(path)
    assert data.directions == {
        "total.bw_mbs_rel": "max",
        "dblog.write.iops": "max",
        "read.lat_p99_ms": "min",
    }  # a metric it cannot vouch for (cached_mb) stays unsaid
    assert data.params == ["fs"]


def test_named_metrics_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    pd.DataFrame({"a": [1, 2], "b": [3, 4], "y": [5.0, 6.0]}).to_csv(path, index=False)
    assert load_dataset(path, ["b"]).params == ["a", "y"]
    with pytest.raises(DatasetError, match="no column"):
        load_dataset(path, ["zzz"])
    with pytest.raises(DatasetError, match="no metric 'q'"):
        load_dataset(path).y("q")
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(DatasetError, match="cannot read"):
        load_dataset(tmp_path / "e.csv")
    bad = tmp_path / "bad.arff"
    bad.write_text("@attribute a numeric\n@attribute b numeric\n@data\n1,2,3\n")
    with pytest.raises(DatasetError, match="bad.arff:4: 3 values, 2 attributes"):
        load_dataset(bad)


def test_design_matrix_one_hot_groups() -> None:
    frame = pd.DataFrame({"n": [1, 2, 3], "c": ["x", "y", "x"], "b": [True, False, True]})
    matrix, groups = design_matrix(frame, ["n", "c", "b"])
    assert groups == {"n": ["n"], "c": ["c=x", "c=y"], "b": ["b"]}
    assert matrix["c=y"].tolist() == [0.0, 1.0, 0.0]


def test_space_inferred_from_a_dataset(tmp_path: Path) -> None:
    path = tmp_path / "i.csv"
    pd.DataFrame(
        {
            "few": [1, 2, 4, 2],
            "many": list(range(0, 40, 10)),
            "real": [0.1, 0.5, 0.25, 0.9],
            "cat": ["a", "b", "a", "a"],
            "y+": [1.0, 2.0, 3.0, 4.0],
        }
    ).to_csv(path, index=False)
    space = space_from_dataset(load_dataset(path), max_levels=3)
    assert space["few"].kind is Kind.ORDINAL and space["few"].values == (1, 2, 4)
    assert space["many"].kind is Kind.INT and (space["many"].low, space["many"].high) == (0, 30)
    assert space["real"].kind is Kind.FLOAT
    assert space["cat"].kind is Kind.CATEGORICAL and space["cat"].default == "a"


@pytest.mark.skipif(
    not SHARED_DATASETS.exists(), reason="../shared/datasets is not beside the repo"
)
def test_shared_datasets_load() -> None:
    postgres = load_dataset(SHARED_DATASETS / "moot-promisetune" / "PostgreSQL.csv")
    assert postgres.metrics == ["Performance"] and len(postgres.params) == 9
    assert len(postgres.aggregated().frame) < len(postgres.frame)
    cassandra = load_dataset(SHARED_DATASETS / "bestconf-samples" / "cassandraYcsba.arff")
    assert cassandra.metrics == ["performance"] and len(cassandra.frame) == 101


def test_inactive_parameters_get_their_own_level_and_replay_as_absent(tmp_path: Path) -> None:
    """A conditional parameter is empty where it does not apply (journal mode on xfs): ranking,
    encoding and models need a level, the table target needs it absent again."""
    from stortune.datasets import INACTIVE, design_matrix
    from stortune.space import parse_space
    from stortune.targets.table import TableTarget

    path = tmp_path / "fs.csv"
    path.write_text("fs,journal,metric.mbs\next4,ordered,10\next4,journal,4\nxfs,,7\nxfs,,8\n")
    data = load_dataset(path)
    assert data.frame["journal"].tolist() == ["ordered", "journal", INACTIVE, INACTIVE]
    matrix, groups = design_matrix(data.frame, data.params)
    assert groups["journal"] == [f"journal={v}" for v in sorted(["journal", INACTIVE, "ordered"])]
    space = parse_space(
        """
name: fs
parameters:
  fs: {type: categorical, values: [ext4, xfs], default: ext4}
  journal: {type: categorical, values: [ordered, journal], default: ordered,
            active_when: "fs == 'ext4'"}
"""
    )
    table = TableTarget.of(data, space)
    assert table.skipped_rows == 0
    table.apply({"fs": "xfs"})
    assert table.run().metrics["mbs"] in (7.0, 8.0)


def _one_hot_table(tmp_path: Path) -> Path:
    """Three methods (one set per row), two table types (likewise), a compression flag that
    is off on some rows and an encryption pair that is all clear on unencrypted rows."""
    path = tmp_path / "groups.csv"
    pd.DataFrame(
        {
            "gzip": [1, 0, 0, 1, 0, 0],
            "compressed": [1, 0, 1, 0, 1, 0],
            "lz4": [0, 1, 0, 0, 1, 0],
            "aes": [0, 0, 1, 0, 0, 0],
            "zstd": [0, 0, 1, 0, 0, 1],
            "blowfish": [0, 1, 0, 0, 0, 0],
            "memory": [1, 1, 1, 0, 0, 0],
            "cached": [0, 0, 0, 1, 1, 1],
            "threads": [1, 2, 4, 8, 1, 2],
            "y+": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        }
    ).to_csv(path, index=False)
    return path


def test_one_hot_groups_fold_into_categoricals(tmp_path: Path) -> None:
    """A group of 0/1 columns with exactly one set in each row is one choice of the system:
    inferred as binaries, most points a tuner proposes (none set, two set) are no row."""
    from stortune.space import fold_one_hot

    data = load_dataset(_one_hot_table(tmp_path))
    folded = fold_one_hot(data)
    assert folded.params == [
        "gzip_or_lz4_or_zstd", "compressed", "aes", "blowfish", "memory_or_cached", "threads"
    ]  # fmt: skip
    assert folded.frame["gzip_or_lz4_or_zstd"].tolist() == [
        "gzip", "lz4", "zstd", "gzip", "lz4", "zstd"
    ]  # fmt: skip
    assert folded.frame["memory_or_cached"].tolist() == ["memory"] * 3 + ["cached"] * 3
    assert folded.y().tolist() == data.y().tolist() and folded.directions == data.directions
    space = space_from_dataset(folded)
    method = space["gzip_or_lz4_or_zstd"]
    assert method.kind is Kind.CATEGORICAL and set(method.values) == {"gzip", "lz4", "zstd"}
    assert space["aes"].kind is Kind.ORDINAL  # all clear on two rows: no group
    assert fold_one_hot(folded) is folded  # nothing left to fold


def test_table_target_folds_an_inferred_space_and_keeps_a_given_one(tmp_path: Path) -> None:
    """Without a space the table is replayed through its folded columns, and so with the space
    inferred then (a resumed campaign's); a space naming the columns keeps them as they are."""
    from stortune.targets.table import TableTarget

    path = _one_hot_table(tmp_path)
    inferred = TableTarget(dataset=str(path))
    assert "gzip_or_lz4_or_zstd" in inferred.space and "gzip" not in inferred.space
    assert len(inferred.configs()) == 6
    third = {"gzip_or_lz4_or_zstd": "zstd", "compressed": 1, "aes": 1, "blowfish": 0}
    third |= {"memory_or_cached": "memory", "threads": 4}
    inferred.apply(third)
    assert inferred.measure().metrics == {"y": 3.0}
    again = TableTarget(inferred.space, dataset=str(path))  # a stored campaign's, resumed
    again.apply(third)
    assert again.measure().metrics == {"y": 3.0} and len(again.configs()) == 6
    kept = TableTarget(space_from_dataset(load_dataset(path)), dataset=str(path))
    assert "gzip" in kept.space and "gzip_or_lz4_or_zstd" not in kept.space
    assert len(kept.configs()) == 6


def test_import_without_a_space_folds_one_hot_groups(tmp_path: Path) -> None:
    """`stortune import` infers the space as the table target does: a campaign of the folded
    parameters, which ranking and models then see as one choice each."""
    import json

    from typer.testing import CliRunner

    from stortune.cli import app

    db = str(tmp_path / "s.db")
    args = ["import", str(_one_hot_table(tmp_path)), "--name", "g", "--store", db, "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    imported = json.loads(result.output)
    assert imported["runs"] == 6 and "memory_or_cached" in imported["parameters"]
    assert "memory" not in imported["parameters"]
