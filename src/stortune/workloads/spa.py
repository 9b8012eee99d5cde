"""SPA's workload as a parametric fio job: the workload half of a workload x system space.

Noorshams et al. (ICPE 2013) drive FFSB over workload parameters: request size, read share,
random or sequential access, the file set's size (so the storage cache matters) and threads;
each thread sends requests of the given size to a randomly chosen 16 MB file of the set, 256 in a
row to one file, sequential within it when the access is sequential. `SpaWorkload` renders that
as a fio job, so a config of the bundled ``spa`` space (workload parameters in layer
``workload``) is one run: the runner hands the config's workload values to `bind`.

``instances`` > 1 is the paper's consolidation: the same workload split over N co-located
instances, each a fio job of its own (its own processes) with its own file
set, threads and file set size divided by N, all running at once; the metrics are the whole's
(throughput summed, response time averaged over every request).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stortune.errors import ConfigError
from stortune.workloads.fio import DEFAULT_RUNTIME, FioWorkload

FILE_MIB = 16  # FFSB's file size in the paper
REQUESTS_PER_FILE = 256  # FFSB: sub-requests per operation, each operation on a random file
ACCESS = {"random": "randrw", "sequential": "rw"}

DEFAULTS: dict[str, Any] = {
    "request_size": 16384,
    "read_share": 50,
    "access": "random",
    "file_set_size": 512,
    "threads": 12,
    "instances": 1,
    "direct": True,
}


class SpaWorkload(FioWorkload):
    """One SPA workload; `values` are the workload parameters (module doc), missing ones at
    `DEFAULTS`. No ramp: fio 3.33 hangs at the end of a ramped time-based job whose clones share
    files served 256 requests at a time, and the target's runs start from a dropped cache
    anyway, the same for every config."""

    kind = "spa"

    def __init__(
        self,
        values: Mapping[str, Any] | None = None,
        runtime: float = DEFAULT_RUNTIME,
        name: str = "spa",
    ) -> None:
        unknown = sorted(set(values or {}) - set(DEFAULTS))
        if unknown:
            raise ConfigError(
                f"workload spa: unknown parameter(s) {', '.join(unknown)} "
                f"(it takes {', '.join(DEFAULTS)})"
            )
        self.values = {**DEFAULTS, **dict(values or {})}
        text = job_text(self.values)
        size = f"{int(self.values['file_set_size'])}m"
        super().__init__("spa", runtime=runtime, size=size, name=name, text=text)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "runtime": self.runtime,
            "values": dict(self.values),
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> SpaWorkload:
        return cls(
            spec.get("values"),
            runtime=spec.get("runtime", DEFAULT_RUNTIME),
            name=spec.get("name", "spa"),
        )

    def bind(self, values: Mapping[str, Any]) -> SpaWorkload:
        if not values:
            return self
        return SpaWorkload({**self.values, **values}, self.runtime, self.name)


def job_text(values: Mapping[str, Any]) -> str:
    """The fio job of one SPA workload (placeholders ``${DIR}`` and ``${RUNTIME}`` left for
    fio's renderer). The request size is rounded to a multiple of 512 bytes and the file set
    to whole 16 MiB files, as the paper's random configs are (its Table 4)."""
    request = 512 * max(1, round(_whole(values, "request_size", 1) / 512))  # as SPA's Table 4
    read = _whole(values, "read_share", 0)
    if read > 100:
        raise ConfigError(f"workload spa: read_share {read} is over 100 (percent)")
    access = str(values["access"])
    if access not in ACCESS:
        raise ConfigError(f"workload spa: access {access!r}: random or sequential")
    instances = _whole(values, "instances", 1)
    threads = _whole(values, "threads", 1)
    size_mib = _whole(values, "file_set_size", FILE_MIB)
    if threads < instances:
        raise ConfigError(f"workload spa: {threads} threads cannot be split over {instances}")
    files = max(instances, size_mib // FILE_MIB)
    direct = values["direct"]
    if not isinstance(direct, bool):
        raise ConfigError(f"workload spa: direct {direct!r}: true or false")
    lines = [
        "; SPA (Noorshams et al., ICPE 2013) after FFSB: requests to random 16 MiB files of a set,",
        f"; {REQUESTS_PER_FILE} in a row per file, {access} within it.",
        "[global]",
        "directory=${DIR}",
        "ioengine=psync",
        f"direct={int(direct)}",
        f"bs={request}",
        f"rw={ACCESS[access]}",
        f"rwmixread={read}",
        f"filesize={FILE_MIB}m",
        f"file_service_type=random:{REQUESTS_PER_FILE}",
        "time_based=1",
        "runtime=${RUNTIME}",
        "randrepeat=0",
        "fallocate=none",
    ]
    per_instance = files // instances
    for i in range(instances):
        prefix = f"spa{i + 1}" if instances > 1 else "spa"
        # An explicit list: numjobs clones share it (a filename_format set is per clone here).
        names = ":".join(f"{prefix}.{n}" for n in range(per_instance))
        lines += [
            "",
            f"[instance{i + 1}]",
            f"numjobs={threads // instances}",
            f"size={per_instance * FILE_MIB}m",
            f"filename={names}",
        ]
    return "\n".join(lines) + "\n"


def _whole(values: Mapping[str, Any], key: str, least: int) -> int:
    value = values[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ConfigError(f"workload spa: {key} {value!r} is not a whole number")
    if value < least:
        raise ConfigError(f"workload spa: {key} {value!r} is below {least}")
    return int(value)
