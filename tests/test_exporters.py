"""Prometheus exposition text into run metrics: only the families asked for, counters as
per-second rates over the run and gauges at its end, an exporter that does not answer named
and left out."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from stortune.system.exporters import Exporter, ExporterSampler, parse

TEXT = """# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} %s
node_cpu_seconds_total{cpu="0",mode="user"} 5
# HELP node_memory_MemAvailable_bytes Memory information field MemAvailable_bytes.
# TYPE node_memory_MemAvailable_bytes gauge
node_memory_MemAvailable_bytes %s
# HELP node_network_receive_bytes_total Network device statistic receive_bytes.
# TYPE node_network_receive_bytes_total counter
node_network_receive_bytes_total{device="lo"} 1
"""


def test_only_the_families_asked_for_with_their_labels_and_kind() -> None:
    samples = parse(
        TEXT % (100, 2048), ["node_cpu_seconds_total", "node_memory_MemAvailable_bytes"]
    )
    assert set(samples) == {
        "node_cpu_seconds_total{cpu=0,mode=idle}",
        "node_cpu_seconds_total{cpu=0,mode=user}",
        "node_memory_MemAvailable_bytes",
    }
    assert samples["node_cpu_seconds_total{cpu=0,mode=idle}"].counter
    assert not samples["node_memory_MemAvailable_bytes"].counter


@pytest.fixture
def exporter() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP exporter on 127.0.0.1 answering each scrape with the next text."""
    texts: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            body = texts.pop(0).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", texts
    finally:
        server.shutdown()


def test_counters_become_rates_and_gauges_their_last_value(exporter) -> None:
    url, texts = exporter
    texts += [TEXT % (100, 4096), TEXT % (160, 1024)]
    families = ("node_cpu_seconds_total", "node_memory_MemAvailable_bytes")
    sampler = ExporterSampler(
        [Exporter("node", url, families), Exporter("gone", "http://127.0.0.1:9/", families)]
    )
    sampler.start()
    sampler._started -= 2.0  # as if the run lasted two seconds (plus the scrape)
    metrics = sampler.stop()
    assert metrics["node.node_cpu_seconds_total{cpu=0,mode=idle}.per_s"] == pytest.approx(
        30, rel=0.05
    )
    assert metrics["node.node_cpu_seconds_total{cpu=0,mode=user}.per_s"] == 0.0
    assert metrics["node.node_memory_MemAvailable_bytes"] == 1024
    assert sampler.missing == ["gone"] and not any(k.startswith("gone.") for k in metrics)
