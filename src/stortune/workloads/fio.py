"""fio workloads: bundled job templates after Filebench's personalities, and user job files.

A job file names its placeholders ``${DIR}`` (the directory to work in), ``${RUNTIME}`` (seconds)
and ``${SIZE}`` (the file set's total size, bytes); ``${NAME/N}`` is NAME divided by N (at least
1), because fio here has no arithmetic in job files and templates split the set over their jobs.
Each bundled template's header comment says how it approximates its Filebench personality.

A user's job file is checked when it is read, before any target is touched: its placeholders,
then fio's own parser (``fio --parse-only``). Its length: ``runtime=${RUNTIME}`` lets
``--runtime`` set it; a file without any runtime line gets ``time_based`` and the runtime asked
for in its ``[global]`` section when ``--runtime`` is given (else it runs as written); a file that
fixes its own ``runtime=`` refuses ``--runtime`` rather than ignore it. Comment lines
``# stortune objective|guardrail|start: ...`` declare what the job is judged on and how its
timed part starts (`workloads.declared`); a malformed one is refused with its line.

fio runs with an argv list (never a shell), in its own process group (killed as a whole on
timeout), through a tiny launcher that makes the kernel kill fio when its parent dies (no orphan
keeps writing to a file system that must be unmounted) and, when asked, moves it into a cgroup.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from stortune.enums import StartState
from stortune.errors import ConfigError, TargetError
from stortune.inputs import TEXT_BYTES, read_text
from stortune.system.scratch import ScratchKind, scratch_folder
from stortune.system.sysmetrics import SystemSampler
from stortune.units import parse_size
from stortune.workloads.base import Measurement, Need, Sampler, Venue, Workload
from stortune.workloads.declared import Declarations, parse_declarations
from stortune.workloads.jobsafety import check_job
from stortune.workloads.launcher import launch_argv, procs_file, run_group

TEMPLATES = (
    "fileserver",
    "webserver",
    "mailserver",
    "dbserver",
    "seqread",
    "seqwrite",
    "randread",
    "randwrite",
    "metadata",
    "stream",
    "rand4k",
    "dbfsync",
    "videoserver",
    "randomrw",
)
ALIASES = {"varmail": "mailserver", "oltp": "dbserver"}
# Small defaults: Filebench's own file set sizes where they are small, else a fraction.
DEFAULT_SIZES = {
    "fileserver": "256m",
    "webserver": "16m",
    "mailserver": "16m",
    "dbserver": "128m",
    "seqread": "512m",
    "seqwrite": "512m",
    "randread": "512m",
    "randwrite": "512m",
    "metadata": "16m",
    "stream": "1g",
    "rand4k": "512m",
    "dbfsync": "256m",
    "videoserver": "512m",
    "randomrw": "512m",
}
DEFAULT_SIZE = "256m"
DEFAULT_RUNTIME = 10.0
MIN_RUNTIME_SHARE = 0.9  # a job that ran less than this share of the runtime is rejected

PLACEHOLDER_HELP = (
    "${DIR} (the directory under test), ${RUNTIME} (seconds, from --runtime), ${SIZE} (the file "
    "set's bytes: 256 MiB for a job file), ${NAME/N} (NAME divided by N)"
)

_MIB = 1024 * 1024
_BARE_BRACES = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")
_RUNTIME_LINE = re.compile(r"^\s*runtime\s*=\s*(.*?)\s*$", re.MULTILINE)
_GLOBAL_SECTION = re.compile(r"^\s*\[global\]\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:/([0-9]+))?\}")
_VARIABLE_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.,:+@%/-]*$")
_META_ENGINES = {"filecreate", "filestat", "filedelete", "dircreate", "dirstat", "dirdelete"}


def template_text(name: str) -> str:
    return (resources.files("stortune") / "workloads" / "jobs" / f"{name}.fio").read_text()


class FioWorkload(Workload):
    """A fio job: a bundled template (see `TEMPLATES`) or a user's ``.fio`` file.

    `runtime` (s) and `size` (the file set's total size) fill ``${RUNTIME}`` and ``${SIZE}``;
    `variables` fill further ``${NAME}`` placeholders of a user's job file.
    """

    kind = "fio"
    needs = Need.DIRECTORY

    def __init__(
        self,
        job: str | os.PathLike[str] = "fileserver",
        runtime: float = DEFAULT_RUNTIME,
        size: str | int | None = None,
        variables: Mapping[str, str | int | float] | None = None,
        name: str | None = None,
        text: str | None = None,
        runtime_given: bool = False,
    ) -> None:
        """`runtime_given`: the user asked for `runtime` (``--runtime``), so a job file must
        take it or refuse it; without it a file that sets no runtime runs as written."""
        job = str(job)
        template = ALIASES.get(job, job)
        from_file = False
        self.runtime_added = False  # time_based and runtime=${RUNTIME} added to a user's file
        if text is not None:
            self.job, self.template = job, None
        elif template in TEMPLATES:
            self.job, self.template = template, template
            text = template_text(template)
        elif job.endswith(".fio") or os.sep in job:
            path = Path(job)
            text = read_text(path, "fio job file", TEXT_BYTES, ConfigError)
            self.job, self.template = str(path.resolve()), None
            self._declared = parse_declarations(text, job)  # lines as the user wrote them
            written = text
            text = _with_runtime(text, job, runtime_given)
            self.runtime_added = text != written
            from_file = True
        else:
            raise ConfigError(
                f"unknown fio template {job!r} (templates: {', '.join(TEMPLATES)}; "
                "or give a path to a .fio job file)"
            )
        if not from_file:
            self._declared = parse_declarations(
                text, f"{self.template}.fio" if self.template else job
            )
        self.text = text
        self.name = name or (self.template or Path(self.job).stem)
        if not (isinstance(runtime, int | float) and math.isfinite(runtime) and runtime >= 1):
            raise ConfigError(f"fio runtime {runtime!r}: give at least 1 second")
        self.runtime = float(runtime)
        self.size = size if size is not None else DEFAULT_SIZES.get(self.name, DEFAULT_SIZE)
        self.size_bytes = parse_size(self.size)
        self.variables = dict(variables or {})
        for key, value in self.variables.items():
            if not _VARIABLE_NAME.match(key) or key in ("DIR", "RUNTIME", "SIZE"):
                raise ConfigError(
                    f"fio variable {key!r}: use an upper-case name other than DIR, RUNTIME and SIZE"
                )
            if not _SAFE_VALUE.match(str(value)):
                raise ConfigError(f"fio variable {key}={value!r}: unsafe characters")
        checked = self.render("/stortune-check", self.runtime)  # unknown placeholders fail here
        if from_file:
            fio_parse(checked, self.name)  # a job fio rejects fails here, before any mkfs

    # ---- spec -----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "kind": self.kind,
            "job": self.job,
            "name": self.name,
            "runtime": self.runtime,
            "size": self.size,
        }
        if self.variables:
            spec["variables"] = self.variables
        if self.template is None:
            spec["text"] = self.text  # a user's file may change or vanish; keep what ran
        return spec

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> FioWorkload:
        return cls(
            spec.get("job", "fileserver"),
            runtime=spec.get("runtime", DEFAULT_RUNTIME),
            size=spec.get("size"),
            variables=spec.get("variables"),
            name=spec.get("name"),
            text=spec.get("text"),
        )

    # ---- job text -------------------------------------------------------------------------
    @property
    def timed(self) -> bool:
        """Whether the job takes its runtime from ``${RUNTIME}`` (so it can be checked)."""
        return "RUNTIME" in placeholders_in(self.text)

    def render(self, directory: str | os.PathLike[str], runtime: float | None = None) -> str:
        """The job text with placeholders filled; refuses paths outside `directory`."""
        directory = str(directory)
        if not directory.startswith("/") or not _SAFE_VALUE.match(directory) or ":" in directory:
            raise ConfigError(
                f"fio directory {directory!r}: an absolute path without ':' "
                "or special characters is needed"
            )
        values: dict[str, str | int] = {
            "DIR": directory,
            "RUNTIME": int(math.ceil(runtime if runtime is not None else self.runtime)),
            "SIZE": self.size_bytes,
            **self.variables,
        }

        def substitute(match: re.Match[str]) -> str:
            key, divisor = match.group(1), match.group(2)
            if key not in values:
                raise ConfigError(
                    f"fio job {self.name}: unknown placeholder ${{{key}}} "
                    f"(known: {', '.join('${' + k + '}' for k in values)})"
                )
            if divisor is None:
                return str(values[key])
            try:
                number = int(float(values[key]))
            except ValueError:
                raise ConfigError(f"fio job {self.name}: ${{{key}}} is not a number") from None
            return str(max(1, number // max(1, int(divisor))))

        text = _PLACEHOLDER.sub(substitute, self.text)
        check_job(text, directory, self.name)  # no programs, nothing outside the directory
        return text

    @property
    def declared(self) -> Declarations:
        """The job text's ``# stortune ...`` lines."""
        return self._declared

    def metric_names(self) -> frozenset[str]:
        """The totals, each job's and each stonewall group's metrics (`parse_fio_output`),
        from the job text's sections."""
        return job_metric_names(self.text)

    # ---- running --------------------------------------------------------------------------
    def default_timeout(self, runtime: float) -> float:
        """Generous: the runtime plus time to lay out the file set and to finish."""
        return runtime * 1.5 + 120.0

    def prepare(
        self,
        directory: str | os.PathLike[str],
        timeout: float | None = None,
        cgroup: str | os.PathLike[str] | None = None,
    ) -> None:
        """Lay out the file set without running the job (fio ``--create_only``), so that the
        run that follows starts from files on disk and a cache the caller may drop. In the
        run's `cgroup`, so a memory cap holds for the file set's pages from the start."""
        text = self.render(directory, self.runtime)
        procs = procs_file(cgroup)
        with scratch_folder(ScratchKind.FIO) as tmp:
            job = Path(tmp) / "job.fio"
            job.write_text(text)
            argv = launch_argv(
                ["fio", "--create_only=1", f"--output={tmp}/out.json", str(job)], procs
            )
            try:
                done = run_group(argv, directory, timeout or self.default_timeout(self.runtime))
            except OSError as exc:
                raise TargetError(f"cannot start fio in {directory}: {exc.strerror}") from None
        if done is None:
            raise TargetError(f"fio job {self.name}: laying out files timed out")
        if done.returncode != 0:
            raise TargetError(
                f"fio job {self.name}: laying out files failed: "
                f"{_error_line(done.stdout, done.stderr)}"
            )

    @property
    def footprint_bytes(self) -> int:
        return self.size_bytes

    @property
    def expected_seconds(self) -> float:
        return self.runtime

    def run(self, venue: Venue, timeout: float | None = None) -> Measurement:
        """Lay out the file set in the venue's directory, let the target settle (drop the page
        cache; not for a job that declares a warm start), then measure."""
        if venue.directory is None:
            raise TargetError(f"fio job {self.name} needs a directory to run in")
        try:
            self.prepare(venue.directory, timeout, venue.cgroup)
        except TargetError as exc:
            return Measurement.failed(str(exc))
        if self.declared.start is StartState.COLD:
            venue.before_measure()
        return self.measure(
            venue.directory,
            timeout,
            cgroup=venue.cgroup,
            devices=venue.devices,
            samplers=venue.samplers,
        )

    def measure(
        self,
        directory: str | os.PathLike[str],
        timeout: float | None = None,
        runtime: float | None = None,
        *,
        cgroup: str | os.PathLike[str] | None = None,
        devices: Iterable[str] = (),
        samplers: Sequence[Sampler] = (),
    ) -> Measurement:
        """Run the job in `directory` (laid out already); `cgroup` (a cgroup folder) confines
        fio, `devices` are the block devices whose utilisation the system metrics report,
        `samplers` the target's own metrics during the run (a cluster's daemons)."""
        runtime = self.runtime if runtime is None else float(runtime)
        timeout = timeout if timeout is not None else self.default_timeout(runtime)
        text = self.render(directory, runtime)
        procs = procs_file(cgroup)
        with scratch_folder(ScratchKind.FIO) as tmp:
            job = Path(tmp) / "job.fio"
            job.write_text(text)
            output = Path(tmp) / "out.json"
            argv = launch_argv(
                ["fio", "--output-format=json+", f"--output={output}", str(job)], procs
            )
            sampler = SystemSampler(devices).start()
            for extra in samplers:
                extra.start()
            started = time.monotonic()
            try:
                done = run_group(argv, directory, timeout)
            except OSError as exc:
                return Measurement.failed(f"cannot start fio: {exc.strerror}")
            finally:
                system = sampler.stop()
                for extra in samplers:
                    system.update(extra.stop())
            if done is None:
                return Measurement.failed(
                    f"fio job {self.name}: killed after the {timeout:g} s time limit", "timeout"
                )
            seconds = time.monotonic() - started
            report = output.read_text() if output.exists() else ""
        info = {"seconds": seconds, "workload": self.name, "runtime_requested": runtime}
        if done.returncode != 0:
            return Measurement.failed(
                f"fio job {self.name}: exit status {done.returncode}: "
                f"{_error_line(done.stdout, done.stderr, report)}",
                **info,
            )
        try:
            data = _load_report(report)
            metrics = _metrics(data)
        except ValueError as exc:
            return Measurement.failed(f"fio job {self.name}: {exc}", **info)
        problem = _job_problem(data, runtime if self.timed else None)
        if problem:
            return Measurement.failed(f"fio job {self.name}: {problem}", **info)
        info["fio_version"] = data.get("fio version", "")
        return Measurement({**metrics, **system}, info=info)


# ---- helpers ------------------------------------------------------------------------------
def placeholders_in(text: str) -> list[str]:
    """The placeholder names a job text uses, sorted."""
    return sorted({m.group(1) for m in _PLACEHOLDER.finditer(text)})


def _with_runtime(text: str, job: str, runtime_given: bool) -> str:
    """A user's job text whose length `--runtime` sets, or a refusal (module doc)."""
    name = Path(job).stem
    options = "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith(("#", ";"))
    )
    bare = _BARE_BRACES.search(_PLACEHOLDER.sub("", options))
    if bare:
        raise ConfigError(
            f"fio job {name}: {{{bare.group(1)}}} is not a placeholder; write "
            f"${{{bare.group(1).upper()}}} (placeholders: {PLACEHOLDER_HELP})"
        )
    if "RUNTIME" in placeholders_in(text) or not runtime_given:
        return text
    fixed = _RUNTIME_LINE.search(text)
    if fixed:
        raise ConfigError(
            f"fio job {name} sets its own runtime={fixed.group(1)}, so --runtime would be "
            "ignored: write runtime=${RUNTIME} in it, or leave out --runtime"
        )
    lines = "time_based=1\nruntime=${RUNTIME}\n"
    section = _GLOBAL_SECTION.search(text)
    if section is None:
        return f"[global]\n{lines}{text}"
    return f"{text[: section.end()]}\n{lines.rstrip()}{text[section.end() :]}"


def fio_parse(text: str, name: str) -> None:
    """fio's own parse of a job text (``--parse-only``: options checked, no I/O); a job fio
    rejects raises ConfigError with fio's line."""
    with scratch_folder(ScratchKind.FIO) as tmp:
        job = Path(tmp) / "job.fio"
        job.write_text(text)
        try:
            done = subprocess.run(
                ["fio", "--parse-only", str(job)], capture_output=True, text=True, timeout=60
            )
        except FileNotFoundError:
            raise ConfigError("fio is not installed (apt install fio)") from None
        except subprocess.TimeoutExpired:
            raise ConfigError(f"fio job {name}: fio's parse did not end in 60 s") from None
    if done.returncode != 0:
        complaint = _parse_error(done.stderr, done.stdout)
        raise ConfigError(f"fio job {name}: fio rejects it: {complaint}")


def _parse_error(*texts: str) -> str:
    """fio's complaint about a job: the failed option, else its error line."""
    lines = [line.strip() for text in texts for line in (text or "").splitlines() if line.strip()]
    for line in lines:
        if "failed parsing" in line or line.startswith("Bad option"):
            return line.removeprefix("fio: ")[:300]
    return _error_line(*texts)


def _error_line(*texts: str) -> str:
    """The most telling line fio printed: its own error line, else the last line."""
    lines = [line.strip() for text in texts for line in (text or "").splitlines() if line.strip()]
    for line in lines:
        if line.startswith("fio:") or "err=" in line or "error" in line.lower():
            return line[:300]
    return lines[-1][:300] if lines else "(no output)"


def _load_report(text: str) -> dict[str, Any]:
    """fio's JSON report, skipping whatever fio printed before it."""
    start = text.find("{")
    while start != -1:
        if start == 0 or text[start - 1] == "\n":
            try:
                data = json.loads(text[start:])
            except json.JSONDecodeError:
                pass
            else:
                if isinstance(data, dict) and isinstance(data.get("jobs"), list):
                    return data
        start = text.find("{", start + 1)
    first = text.strip().splitlines()[0][:200] if text.strip() else "nothing"
    raise ValueError(f"no fio JSON report in the output (it printed: {first})")


def _job_problem(data: Mapping[str, Any], runtime: float | None) -> str | None:
    """Why a report that parsed is still not a valid measurement, if it is not."""
    for job in data["jobs"]:
        if job.get("error"):
            return f"job {job.get('jobname')} reported error {job['error']}"
    if runtime is None:
        return None
    shortest = min(data["jobs"], key=_job_seconds, default=None)
    if shortest is not None and _job_seconds(shortest) < MIN_RUNTIME_SHARE * runtime:
        return (
            f"job {shortest.get('jobname')} ran {_job_seconds(shortest):.2f} s of the "
            f"{runtime:g} s asked (under {MIN_RUNTIME_SHARE:.0%}: not time-based, or it stopped "
            "early)"
        )
    return None


def _job_seconds(job: Mapping[str, Any]) -> float:
    if "job_runtime" in job:
        return float(job["job_runtime"]) / 1000.0
    return max(float(job.get(d, {}).get("runtime", 0)) for d in ("read", "write", "trim")) / 1e3


def _engine(job: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    options = job.get("job options") or {}
    return str(options.get("ioengine") or (data.get("global options") or {}).get("ioengine", ""))


def parse_fio_output(text: str) -> dict[str, float]:
    """Metrics from fio's JSON (or json+) report; any text fio printed before it is skipped.

    Totals over every job, per direction (``read``, ``write``) and for both (``total``):
    ``bw_mbs`` (MiB/s), ``iops``, ``lat_mean_ms`` (total latency) and
    ``lat_p50_ms``/``lat_p99_ms``/``lat_p999_ms`` (completion latency percentiles: exact over
    the jobs from json+ histograms, else the I/O-weighted mean of the jobs' percentiles). Rates
    are over the run's wall time (the longest job of each group, groups one after the other).
    fsyncs and fdatasyncs appear as ``sync.*`` (``iops``, latencies); jobs of metadata engines
    (filestat, filecreate, ...) as ``meta.*``, never as read bandwidth. Plus ``runtime_s``,
    ``error`` (jobs that reported an error), and ``workload.read_mb``/``workload.write_mb``:
    the MiB (2**20 bytes) the I/O jobs read and wrote in the timed part.

    The same per fio job, named ``JOB.read.*``, ``JOB.write.*``, ``JOB.total.*``,
    ``JOB.sync.*`` (``JOB.meta.*`` for a metadata engine's job), JOB being fio's jobname: the
    clones ``numjobs`` makes share it and are merged (rates summed, histograms merged), and
    its rates are over its group's wall time. A jobname that clashes with a name above (or
    ``job``, ``groupN``), or holds characters other than letters, digits, ``_`` and ``-``, is
    written ``job.NAME.*`` (`job_prefixes`). A report of several stonewall groups adds
    ``groupN.*`` per group, N fio's groupid. Raises ValueError without a report.
    """
    return _metrics(_load_report(text))


# First parts of metric names that are not a job's: a job named so is written job.NAME.
RESERVED_NAMES = frozenset(
    {"read", "write", "total", "sync", "meta", "sys", "device", "workload", "runtime_s", "error"}
    | {"job"}
)
_PLAIN_JOB = re.compile(r"^[A-Za-z0-9_-]+$")
_GROUP_NAME = re.compile(r"^group[0-9]+$")
_DIRECTIONS = ("read", "write")
_LATENCIES = ("lat_mean_ms", "lat_p50_ms", "lat_p99_ms", "lat_p999_ms")


def job_prefixes(jobnames: Iterable[str]) -> dict[str, str]:
    """The metric prefix of each fio jobname, in order: the name itself, or ``job.NAME`` when
    it clashes with a reserved first part (`RESERVED_NAMES`, ``groupN``) or holds other
    characters than ``[A-Za-z0-9_-]`` (each replaced by ``_``); a prefix taken already gets
    ``-2``, ``-3``, ..."""
    out: dict[str, str] = {}
    for name in jobnames:
        if name in out:
            continue
        if _PLAIN_JOB.match(name) and name not in RESERVED_NAMES and not _GROUP_NAME.match(name):
            prefix = name
        else:
            prefix = "job." + (re.sub(r"[^A-Za-z0-9_-]", "_", name) or "_")
        base, n = prefix, 2
        while prefix in out.values():
            prefix, n = f"{base}-{n}", n + 1
        out[name] = prefix
    return out


def _metrics(data: Mapping[str, Any]) -> dict[str, float]:
    jobs = data["jobs"]
    if not jobs:
        raise ValueError("the fio report has no jobs")
    groups: dict[Any, float] = {}
    for job in jobs:
        gid = job.get("groupid", 0)
        groups[gid] = max(groups.get(gid, 0.0), _job_seconds(job))
    seconds = sum(groups.values())
    out: dict[str, float] = {
        "runtime_s": seconds,
        "error": float(sum(1 for j in jobs if j.get("error"))),
    }
    out.update(_summary("", jobs, data, seconds, every_direction=True))
    io_jobs = [j for j in jobs if _engine(j, data) not in _META_ENGINES]
    for direction in _DIRECTIONS:
        moved = sum(j[direction].get("io_bytes", 0) for j in io_jobs if _has(j, direction))
        out[f"workload.{direction}_mb"] = moved / _MIB
    names = job_prefixes(str(j.get("jobname", "")) for j in jobs)
    for name, prefix in names.items():
        mine = [j for j in jobs if str(j.get("jobname", "")) == name]
        wall = sum(groups[g] for g in {j.get("groupid", 0) for j in mine})
        out.update(_summary(f"{prefix}.", mine, data, wall))
    if len(groups) > 1:
        for gid, wall in groups.items():
            mine = [j for j in jobs if j.get("groupid", 0) == gid]
            out.update(_summary(f"group{gid}.", mine, data, wall))
    return out


def _has(job: Mapping[str, Any], part: str) -> bool:
    return isinstance(job.get(part), Mapping)


def _summary(
    prefix: str,
    jobs: Sequence[Mapping[str, Any]],
    data: Mapping[str, Any],
    seconds: float,
    every_direction: bool = False,
) -> dict[str, float]:
    """``read.*``, ``write.*``, ``total.*``, ``sync.*`` and ``meta.*`` of `jobs` over
    `seconds`, each name after `prefix`; read/write/total only when some job does I/O (always
    with `every_direction`), meta only for jobs of metadata engines."""
    io_jobs = [j for j in jobs if _engine(j, data) not in _META_ENGINES]
    meta_jobs = [j for j in jobs if _engine(j, data) in _META_ENGINES]
    out: dict[str, float] = {}
    if io_jobs or every_direction:
        parts = {d: [j[d] for j in io_jobs if _has(j, d)] for d in _DIRECTIONS}
        for direction, stats in parts.items():
            out.update(_direction(prefix + direction, stats, seconds))
        out.update(_direction(prefix + "total", parts["read"] + parts["write"], seconds))
    # fio 3.33 counts fsyncs in total_ios but not fdatasyncs; the latency's N counts both
    syncs = [j["sync"] for j in io_jobs if _has(j, "sync")]
    count = sum(max(s.get("total_ios", 0), (s.get("lat_ns") or {}).get("N", 0)) for s in syncs)
    if count:
        out[prefix + "sync.iops"] = _rate(count, seconds)
        out.update(_latency(prefix + "sync", [s.get("lat_ns", {}) for s in syncs]))
    if meta_jobs:
        stats = [j[d] for j in meta_jobs for d in _DIRECTIONS if _has(j, d)]
        out[prefix + "meta.iops"] = _rate(sum(s.get("total_ios", 0) for s in stats), seconds)
        out.update(_latency(prefix + "meta", [s.get("lat_ns", {}) for s in stats]))
    return out


@dataclass(frozen=True)
class JobSection:
    """One job of a job text as fio reads it: its name (``name=``, else the section's), its
    options (those of the ``[global]`` sections before it, then its own) and its group."""

    name: str
    options: Mapping[str, str]
    group: int

    def flag(self, option: str) -> bool:
        return self.options.get(option, "0").strip().lower() not in ("0", "false", "no", "off")

    @property
    def meta(self) -> bool:
        return self.options.get("ioengine", "").strip() in _META_ENGINES

    @property
    def directions(self) -> tuple[str, ...]:
        """The directions whose latencies the job reports: as its ``rw`` says (reads too when
        it verifies what it wrote); both when that cannot be told."""
        mode = self.options.get("rw", self.options.get("readwrite", "read")).split(":")[0].strip()
        if mode in _MIXED or (mode in _WRITING and self.options.get("verify", "0") not in _OFF):
            return _DIRECTIONS
        if mode in _READING:
            return ("read",)
        if mode in _WRITING:
            return ("write",)
        return () if mode in ("trim", "randtrim") else _DIRECTIONS

    @property
    def syncs(self) -> bool:
        return any(
            self.options.get(o, "0").strip() not in _OFF
            for o in ("fsync", "fdatasync", "sync_file_range")
        )


_READING = {"read", "randread"}
_WRITING = {"write", "randwrite", "trimwrite", "randtrimwrite"}
_MIXED = {"rw", "readwrite", "randrw"}
_OFF = {"0", "", "none"}


def job_sections(text: str) -> list[JobSection]:
    """The jobs of a fio job text, in order, with fio's stonewall groups (a job with
    ``stonewall``/``wait_for_previous`` or ``new_group`` after others opens the next group); the
    jobs of a ``group_reporting`` group take its first job's name, as fio reports them as one."""
    defaults: dict[str, str] = {}
    raw: list[tuple[str, dict[str, str]]] = []
    current: dict[str, str] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        section = re.match(r"^\[([^\]]+)\]$", line)
        if section:
            title = section.group(1).strip()
            if title == "global":
                current = defaults  # applies to the jobs after it
            else:
                current = dict(defaults)
                raw.append((title, current))
            continue
        if current is not None:
            key, sep, value = line.partition("=")
            current[key.strip()] = value.strip() if sep else "1"
    out: list[JobSection] = []
    group = 0
    for title, options in raw:
        job = JobSection(options.get("name", title), options, group)
        if out and any(job.flag(o) for o in ("stonewall", "wait_for_previous", "new_group")):
            group += 1
        elif out and job.flag("group_reporting"):
            out.append(JobSection(out[-1].name, options, group))  # reported as the group's first
            continue
        out.append(JobSection(job.name, options, group))
    return out


def job_metric_names(text: str) -> frozenset[str]:
    """The metric names a run of this job text can report (`parse_fio_output`), besides the
    target's own (``sys.*``)."""
    jobs = job_sections(text)
    names = {"runtime_s", "error", "workload.read_mb", "workload.write_mb"}
    names |= _summary_names("", jobs, every_direction=True)
    for name, prefix in job_prefixes(j.name for j in jobs).items():
        names |= _summary_names(f"{prefix}.", [j for j in jobs if j.name == name])
    groups = sorted({j.group for j in jobs})
    if len(groups) > 1:
        for gid in groups:
            names |= _summary_names(f"group{gid}.", [j for j in jobs if j.group == gid])
    return frozenset(names)


def report_metric_names() -> frozenset[str]:
    """Every name a fio report can give whatever its jobs (`parse_fio_output`): the totals,
    and each job's and group's as patterns (``*.write.iops``)."""
    parts = (*_DIRECTIONS, "total", "sync", "meta")
    totals = {f"{part}.{stat}" for part in parts for stat in ("bw_mbs", "iops", *_LATENCIES)}
    base = {"runtime_s", "error", "workload.read_mb", "workload.write_mb"}
    return frozenset(base | totals | {f"*.{name}" for name in totals})


def _summary_names(
    prefix: str, jobs: Sequence[JobSection], every_direction: bool = False
) -> set[str]:
    """The names `_summary` can give these jobs."""
    io_jobs = [j for j in jobs if not j.meta]
    out: set[str] = set()
    if io_jobs or every_direction:
        for part in (*_DIRECTIONS, "total"):
            out |= {f"{prefix}{part}.bw_mbs", f"{prefix}{part}.iops"}
        timed = {d for j in io_jobs for d in j.directions}
        for part in (*sorted(timed), *(("total",) if timed else ())):
            out |= {f"{prefix}{part}.{lat}" for lat in _LATENCIES}
    if any(j.syncs for j in io_jobs):
        out |= {f"{prefix}sync.iops"} | {f"{prefix}sync.{lat}" for lat in _LATENCIES}
    if len(io_jobs) < len(jobs):
        out |= {f"{prefix}meta.iops"} | {f"{prefix}meta.{lat}" for lat in _LATENCIES}
    return out


def _rate(amount: float, seconds: float) -> float:
    return amount / seconds if seconds > 0 else 0.0


def _direction(prefix: str, stats: list[Mapping[str, Any]], seconds: float) -> dict[str, float]:
    out = {
        f"{prefix}.bw_mbs": _rate(sum(s.get("io_bytes", 0) for s in stats), seconds) / _MIB,
        f"{prefix}.iops": _rate(sum(s.get("total_ios", 0) for s in stats), seconds),
    }
    if sum(s.get("total_ios", 0) for s in stats) > 0:
        # mean of the total latency; percentiles of the completion latency (fio's default)
        out.update(_latency(prefix, [s.get("lat_ns", {}) for s in stats], percentiles=False))
        out.update(_percentiles(prefix, [s.get("clat_ns", {}) for s in stats]))
    return out


def _latency(
    prefix: str, lats: list[Mapping[str, Any]], percentiles: bool = True
) -> dict[str, float]:
    count = sum(lat.get("N", 0) for lat in lats)
    if count == 0:
        return {}
    mean = sum(lat.get("mean", 0.0) * lat.get("N", 0) for lat in lats) / count
    out = {f"{prefix}.lat_mean_ms": mean / 1e6}
    if percentiles:
        out.update(_percentiles(prefix, lats))
    return out


_WANTED = {"p50": 50.0, "p99": 99.0, "p999": 99.9}


def _percentiles(prefix: str, lats: list[Mapping[str, Any]]) -> dict[str, float]:
    """Latency percentiles (ms): merged histograms when every part has them (json+)."""
    lats = [lat for lat in lats if lat.get("N", 0) > 0]
    if not lats:
        return {}
    out: dict[str, float] = {}
    if all(isinstance(lat.get("bins"), Mapping) and lat["bins"] for lat in lats):
        merged: dict[int, int] = {}
        for lat in lats:
            for value, count in lat["bins"].items():
                merged[int(value)] = merged.get(int(value), 0) + int(count)
        ordered = sorted(merged.items())
        total = sum(merged.values())
        for name, pct in _WANTED.items():
            need, seen = pct / 100.0 * total, 0
            for value, count in ordered:
                seen += count
                if seen >= need:
                    out[f"{prefix}.lat_{name}_ms"] = value / 1e6
                    break
        return out
    count = sum(lat["N"] for lat in lats)
    for name, pct in _WANTED.items():
        key = f"{pct:.6f}"
        have = [
            (lat["percentile"][key], lat["N"])
            for lat in lats
            if key in (lat.get("percentile") or {})
        ]
        if len(have) == len(lats):
            out[f"{prefix}.lat_{name}_ms"] = sum(v * n for v, n in have) / count / 1e6
    return out
