"""A benchmark process SIGKILLed mid-run leaves settings, a mount and a loop device behind; the
next localfs target undoes all of it before doing anything else, and fio dies with its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.localfs import (
    guarded_state_dir,
    loop_devices_of,
    loop_queues,
    mounts_under,
    needs_fio,
    needs_root,
    processes_under,
    queue_settings,
    read_setting,
    wait_for,
)

from stortune.targets.localfs import LocalFsTarget

CHILD = textwrap.dedent(
    """\
    import sys
    from stortune.space import parse_space
    from stortune.targets.localfs import LocalFsTarget
    from stortune.workloads import FioWorkload

    space = parse_space('''
    name: crash
    parameters:
      scheduler: {type: categorical, values: [none, bfq], default: none, layer: block,
                  option: scheduler}
      read_ahead_kb: {type: ordinal, values: [128, 1024], default: 128, layer: block,
                      option: read_ahead_kb}
      dirty_ratio: {type: ordinal, values: [20, 33], default: 20, layer: vm,
                    option: vm.dirty_ratio}
    ''')
    target = LocalFsTarget(space, fs="ext4", image_size="256m", state_dir=sys.argv[1])
    target.apply({"scheduler": "bfq", "read_ahead_kb": 1024, "dirty_ratio": 33})
    print(target._dev, flush=True)
    target.run(FioWorkload("randwrite", runtime=60, size="16m"), timeout=120)
    """
)


@pytest.fixture
def system(tmp_path: Path) -> Iterator[Path]:
    yield from guarded_state_dir(tmp_path)


def kill_mid_run(system: Path) -> str:
    """Start CHILD's run on a target in `system`, SIGKILL it while fio writes, check what it
    left changed; return its loop device."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(system)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(system.parent)},  # its temporary files stay in the test
    )
    try:
        device = child.stdout.readline().strip()
        assert device.startswith("/dev/loop"), "the child did not get as far as its run"
        assert wait_for(lambda: processes_under(system, "fio"), 20), "fio never started"
        time.sleep(0.5)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # the crash left everything changed ...
    assert read_setting("/proc/sys/vm/dirty_ratio") == "33"
    assert queue_settings(device)["scheduler"] == "bfq"
    assert mounts_under(system) and loop_devices_of(system)
    # ... but not fio, which the kernel killed with its parent
    assert wait_for(lambda: not processes_under(system, "fio"), 10), "fio outlived its parent"
    return device


@needs_root
@needs_fio
def test_next_target_undoes_a_killed_run(system: Path) -> None:
    vm_before = read_setting("/proc/sys/vm/dirty_ratio")
    queues_before = loop_queues()
    device = kill_mid_run(system)

    with LocalFsTarget("localfs", image_size="256m", state_dir=system) as target:
        target.setup()  # recovery happens here, before this target changes anything
        assert read_setting("/proc/sys/vm/dirty_ratio") == vm_before
        assert device not in loop_devices_of(system) or loop_devices_of(system)[device] == str(
            target._image_path
        )
        assert mounts_under(system) == []
        if device in queues_before:  # a loop device made by the child has no "before"
            assert queue_settings(device) == queues_before[device]
        assert len(list(system.glob("journal-*.jsonl"))) == 1  # only the new target's
        assert [p.name for p in system.glob("*.img")] == [target._image_path.name]


@needs_root
@needs_fio
def test_a_killed_test_sessions_leftovers_are_undone_by_the_next_session(system: Path) -> None:
    """A test's state folder is temporary, so no later target recovers it: the next test
    session undoes what a killed one left under the temporary folder's pytest layout."""
    from conftest import undo_killed_sessions

    temp_root = system.parent / "temp"  # the guard of `system` cleans all of tmp_path
    state = temp_root / "pytest-of-root" / "pytest-7" / "state0"
    vm_before = read_setting("/proc/sys/vm/dirty_ratio")
    queues_before = loop_queues()
    device = kill_mid_run(state)

    assert undo_killed_sessions(temp_root) == []
    assert read_setting("/proc/sys/vm/dirty_ratio") == vm_before
    assert mounts_under(state) == [] and loop_devices_of(state) == {}
    if device in queues_before:
        assert queue_settings(device) == queues_before[device]
    assert undo_killed_sessions(temp_root) == []  # nothing left to undo, nothing fails
