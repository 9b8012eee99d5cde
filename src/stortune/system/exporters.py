"""Metrics from Prometheus exporters (Ceph's ``ceph-mgr`` prometheus module, Debian's
``prometheus-node-exporter``), scraped over HTTP around a run: Magpie's server and client state
from the collectors a storage team already runs, not from stortune's own sampling.

`scrape` reads one exporter's text exposition (prometheus_client's parser) into
``{key: value}``, a key being the sample's name with its labels (``node_cpu_seconds_total{cpu=0,
mode=idle}``), kept only for the samples asked for. `ExporterSampler` scrapes every
exporter at the start and end of a run: counters become per-second rates over the run, gauges
their value at the end; keys are prefixed with the exporter's name (``node.``, ``ceph.``). An
exporter that does not answer gives no keys (the run is not failed for it), and `missing` says
which.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

SCRAPE_SECONDS = 5.0
# What Magpie's Table I reads, as these exporters name the samples.
NODE_FAMILIES = (
    "node_cpu_seconds_total",
    "node_memory_MemAvailable_bytes",
    "node_memory_Dirty_bytes",
    "node_disk_read_bytes_total",
    "node_disk_written_bytes_total",
    "node_disk_reads_completed_total",
    "node_disk_writes_completed_total",
    "node_disk_io_time_seconds_total",
    "node_load1",
)
CEPH_FAMILIES = (
    "ceph_osd_op_r_total",
    "ceph_osd_op_w_total",
    "ceph_osd_op_in_bytes_total",
    "ceph_osd_op_out_bytes_total",
    "ceph_osd_op_r_latency_sum_total",
    "ceph_osd_op_r_latency_count_total",
    "ceph_osd_op_w_latency_sum_total",
    "ceph_osd_op_w_latency_count_total",
    "ceph_osd_op_wip",
    "ceph_osd_commit_latency_ms",
    "ceph_mds_request_total",
    "ceph_mds_reply_latency_sum_total",
    "ceph_mds_reply_latency_count_total",
    "ceph_mds_inodes",
    "ceph_mds_caps",
    "ceph_pool_rd_bytes_total",
    "ceph_pool_wr_bytes_total",
)


@dataclass(frozen=True)
class Sample:
    value: float
    counter: bool


def _key(name: str, labels: Mapping[str, str]) -> str:
    if not labels:
        return name
    inner = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def parse(text: str, families: Iterable[str]) -> dict[str, Sample]:
    """The samples named in `families` in an exposition text (by sample name: a counter's
    family drops the _total its samples carry)."""
    wanted = set(families)
    out: dict[str, Sample] = {}
    for family in text_string_to_metric_families(text):
        counter = family.type in ("counter", "summary", "histogram")
        for sample in family.samples:
            if sample.name not in wanted:
                continue
            out[_key(sample.name, sample.labels)] = Sample(float(sample.value), counter)
    return out


def scrape(url: str, families: Iterable[str], timeout: float = SCRAPE_SECONDS) -> dict[str, Sample]:
    """One exporter's samples of `families` (OSError when it does not answer)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - our URL
        text = response.read().decode(errors="replace")
    return parse(text, families)


@dataclass
class Exporter:
    name: str  # the key prefix: node, ceph
    url: str
    families: tuple[str, ...]

    def wait_ready(self, sample: str, timeout: float) -> bool:
        """Whether the exporter serves `sample` within `timeout` seconds (a freshly enabled
        mgr module answers before it has the daemons' counters: a run's rates need them at
        its start)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if any(k.split("{")[0] == sample for k in scrape(self.url, self.families)):
                    return True
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)


@dataclass
class ExporterSampler:
    """Rates of counters and ends of gauges over a run, from each exporter (module doc)."""

    exporters: list[Exporter]
    missing: list[str] = field(default_factory=list)
    _start: dict[str, dict[str, Sample]] = field(default_factory=dict)
    _started: float = 0.0

    def start(self) -> ExporterSampler:
        self.missing = []
        self._start = {e.name: self._scrape(e) for e in self.exporters}
        self._started = time.monotonic()
        return self

    def _scrape(self, exporter: Exporter) -> dict[str, Sample]:
        try:
            return scrape(exporter.url, exporter.families)
        except (OSError, ValueError):  # URLError is an OSError
            if exporter.name not in self.missing:
                self.missing.append(exporter.name)
            return {}

    def stop(self) -> dict[str, float]:
        seconds = max(time.monotonic() - self._started, 1e-6)
        out: dict[str, float] = {}
        for exporter in self.exporters:
            before = self._start.get(exporter.name, {})
            after = self._scrape(exporter)
            for key, sample in after.items():
                name = f"{exporter.name}.{key}"
                if not sample.counter:
                    out[name] = sample.value
                elif key in before:
                    out[f"{name}.per_s"] = max(0.0, sample.value - before[key].value) / seconds
        return out
