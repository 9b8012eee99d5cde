import json
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from stortune.datasets import from_frame
from stortune.errors import StortuneError, TargetError
from stortune.space import parse_space
from stortune.targets import make_target
from stortune.targets.command import CommandTarget
from stortune.targets.table import TableTarget

ECHO = [
    sys.executable,
    "-c",
    "import json, sys, os; print(json.dumps({'argv': sys.argv[1:], 'n': len(sys.argv) - 1,"
    " 'cfg': float(json.loads(os.environ['STORTUNE_CONFIG'])['v'] == sys.argv[1])}))",
]


def test_values_reach_the_program_as_single_arguments_never_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = f"x; touch {marker} && $(touch {marker}) `touch {marker}`"
    target = CommandTarget(command=[*ECHO, "{v}"])
    with target:
        target.apply({"v": evil})
        measurement = target.run()
    assert measurement.ok, measurement.error
    assert measurement.metrics["n"] == 1.0  # one argv item, however many spaces and quotes
    assert measurement.metrics["cfg"] == 1.0  # the config also arrives intact as JSON
    assert not marker.exists()


def test_placeholders_inside_an_argument_and_workdir(tmp_path: Path) -> None:
    script = tmp_path / "w.py"
    script.write_text(
        "import json, sys, os\n"
        "print(json.dumps({'ok': float(os.path.isdir(sys.argv[2])),"
        " 'bs': float(sys.argv[1].split('=')[1])}))\n"
    )
    target = CommandTarget(command=[sys.executable, str(script), "--bs={bs}", "{workdir}"])
    with target:
        target.apply({"bs": 4096})
        m = target.run()
    assert m.metrics == {"ok": 1.0, "bs": 4096.0}


def test_missing_program_and_missing_parameter_are_clear() -> None:
    with pytest.raises(TargetError, match="command not found: no-such-program"):
        CommandTarget(command=["no-such-program", "{x}"]).setup()
    with pytest.raises(TargetError, match=r"names \{x\}"):
        CommandTarget(command=[sys.executable, "{x}"]).apply({"y": 1})


def test_command_target_rebuilds_from_its_spec() -> None:
    target = CommandTarget(command="prog --a {a}", output="fio")
    again = make_target(
        target.describe(),
        parse_space("name: s\nparameters:\n  a: {type: int, low: 1, high: 2, default: 1}\n"),
    )
    assert isinstance(again, CommandTarget)
    assert again.argv == ["prog", "--a", "{a}"] and again.output == "fio"


@pytest.fixture
def table() -> TableTarget:
    frame = pd.DataFrame(
        {
            "bs": [4, 4, 8, 8, 16],
            "fs": ["ext4", "ext4", "xfs", "ext4", "xfs"],
            "Throughput+": [10.0, 12.0, 20.0, 15.0, 30.0],
        }
    )
    return TableTarget.of(from_frame(frame, source="t.csv"))


def test_table_replays_the_stored_repetition(table: TableTarget) -> None:
    table.apply({"bs": 4, "fs": "ext4"})
    values = [table.run(repetition=r).metrics["Throughput"] for r in range(3)]
    assert values == [10.0, 12.0, 10.0]  # repetition r is the r-th stored run, cycling
    assert table.run(repetition=1).metrics["Throughput"] == 12.0  # whenever it is asked
    assert table.optimum() == 30.0
    assert len(table.configs()) == 4


def test_table_unknown_config_is_an_error_or_the_nearest(table: TableTarget) -> None:
    with pytest.raises(TargetError, match="config not in the dataset t.csv"):
        table.apply({"bs": 16, "fs": "ext4"})
    table.nearest = True
    table.apply({"bs": 16, "fs": "ext4"})
    assert table.run().metrics["Throughput"] in (15.0, 30.0)


def test_table_target_from_spec(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    pd.DataFrame({"a": [1, 2], "y+": [1.0, 2.0]}).to_csv(path, index=False)
    spec = {"kind": "table", "dataset": str(path)}
    target = make_target(
        spec,
        parse_space("name: s\nparameters:\n  a: {type: ordinal, values: [1, 2], default: 1}\n"),
    )
    target.apply({"a": 2})
    assert target.run().metrics == {"y": 2.0}
    assert json.loads(json.dumps(target.describe()))["dataset"] == str(path)


def test_table_run_takes_the_replay_time_also_on_a_target_rebuilt_from_its_spec(
    tmp_path: Path,
) -> None:
    path = tmp_path / "d.csv"
    pd.DataFrame({"a": [1, 2], "y+": [1.0, 2.0]}).to_csv(path, index=False)
    space = parse_space("name: s\nparameters:\n  a: {type: ordinal, values: [1, 2], default: 1}\n")
    spec = {"kind": "table", "dataset": str(path), "replay_seconds": 0.2}
    target = make_target(make_target(spec, space).describe(), space)  # as a cluster node does
    target.apply({"a": 2})
    started = time.monotonic()
    measurement = target.run()
    assert time.monotonic() - started >= 0.2
    assert measurement.metrics == {"y": 2.0}
    with pytest.raises(TargetError, match="--replay-seconds is from 0 to 3600"):
        make_target({**spec, "replay_seconds": -1.0}, space)


def test_unknown_target_kind() -> None:
    with pytest.raises(TargetError, match="unknown target 'nfs'"):
        make_target(
            {"kind": "nfs"}, parse_space("name: s\nparameters:\n  a: {type: bool, default: true}\n")
        )


def test_ceph_options_choose_the_mode_and_rados_workloads() -> None:
    from stortune.cli.targets import TargetOptions
    from stortune.targets.ceph import CephTarget

    local = TargetOptions("ceph", values={"osds": 3}).build(None)
    assert isinstance(local, CephTarget)
    assert (local.mode, local.osds, local.health_timeout) == ("local", 3, 180.0)
    options = TargetOptions(
        values={"conf": "/etc/ceph/ceph.conf", "keyring": "k", "allow_restart": True}
    )
    assert options.kind == "ceph"  # --ceph-conf names the target
    existing = options.build(None)
    spec = existing.describe()
    assert (spec["mode"], spec["conf"], spec["keyring"], spec["allow_restart"]) == (
        "existing",
        "/etc/ceph/ceph.conf",
        "k",
        True,
    )
    loads = TargetOptions("ceph", ["rados-write", "rados-seq"], 7.0).workloads(local)
    assert [(w.name, w.mode, w.duration, w.prefill) for w in loads] == [
        ("rados-write", "write", 7.0, 0.0),
        ("rados-seq", "seq", 7.0, 7.0),
    ]
    assert [w.name for w in TargetOptions("ceph", [], 5.0).workloads(local)] == ["rados-rand"]
    table = TableTarget.of(from_frame(pd.DataFrame({"a": [1], "y+": [1.0]}), source="t.csv"))
    with pytest.raises(StortuneError, match="measures by itself: it takes no --workload"):
        TargetOptions("table", ["fileserver"]).workloads(table)
    with pytest.raises(StortuneError, match="--osds is an option of the ceph / cephfs target"):
        TargetOptions("localfs", values={"osds": 3}).build(None)
