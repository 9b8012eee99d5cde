"""The videoserver job serves its streams at their bitrate, as Filebench's does, so a config can
raise its throughput only by taking new videos in faster, not by starving the writer."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from stortune.workloads.fio import FioWorkload

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root")

STREAMS_MIBS = 4 * 6.0  # 4 readers at 6 MiB/s: Filebench's 96 requests of 256 KiB a second


@pytest.fixture
def ram_directory(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "ram"
    directory.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(directory)], check=True)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def test_the_streams_are_held_to_their_bitrate_while_the_writer_is_not(ram_directory: Path) -> None:
    job = FioWorkload("videoserver", runtime=3, size="160m")
    job.prepare(ram_directory)
    metrics = job.measure(ram_directory).metrics
    # memory could serve the readers at GB/s; the job holds them to the streams' bitrate
    assert 0.8 * STREAMS_MIBS <= metrics["read.bw_mbs"] <= 1.1 * STREAMS_MIBS
    # the writer pauses after each video but is otherwise as fast as the storage below it
    assert metrics["write.bw_mbs"] > 2 * STREAMS_MIBS
