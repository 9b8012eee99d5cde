"""The report in a real browser: headless Chromium (Debian's `chromium`) renders every section
and every plot, and asks the network for nothing.

Chromium is pointed at a proxy of our own that records every request it receives, with the
usual loopback bypass removed, so any http(s) or websocket request the page made would reach it.
A control page with one remote image shows that the recorder does see requests.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fixtures.report import PROFILE, SECTIONS, tuned_store

from stortune.report import write_report

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason="Debian's chromium is not installed (apt-get install chromium; "
        "scripts/install-system.sh installs it as root)",
    ),
    pytest.mark.usefixtures("quiet_fingerprint"),
]
PLOTS = ("plot-runs", "plot-carver", "plot-lasso", "plot-tuning", "plot-models", "plot-profile")


# Hosts of Chromium's own services (updates, sign-in, network time). Flags turn most of this
# traffic off, not all of it; it is the browser's, not the page's, so it does not count.
BROWSER_HOSTS = (
    "update.googleapis.com",
    "accounts.google.com",
    "clients2.google.com",
    "clientservices.googleapis.com",
    "optimizationguide-pa.googleapis.com",
    "redirector.gvt1.com",
    "edgedl.me.gvt1.com",
)


def host(request_line: str) -> str:
    """The host a proxy request line asks for (``GET http://h/x ...``, ``CONNECT h:443 ...``)."""
    parts = request_line.split(" ")
    target = parts[1] if len(parts) > 1 else ""
    if "://" in target:
        return urlsplit(target).hostname or ""
    return target.rsplit(":", 1)[0]


class Recorder:
    """A proxy that answers every request with 502 and remembers its first line. A connection
    that sends nothing (Chromium preconnects sockets it may never use) is no request."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.requests: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    data = conn.recv(4096)
                except OSError:  # a preconnected socket left idle
                    continue
                if not data:
                    continue
                self.requests.append(data.decode("latin-1").split("\r\n", 1)[0])
                with contextlib.suppress(OSError):
                    conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")

    def from_page(self) -> list[str]:
        """The requests that are not Chromium's own service traffic."""
        return [r for r in self.requests if host(r) not in BROWSER_HOSTS]

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    proxy = Recorder()
    yield proxy
    proxy.close()


def chromium(page: Path, profile_dir: Path, proxy: Recorder, *mode: str) -> str:
    """Run headless Chromium on `page` through the recording proxy; its stdout."""
    result = subprocess.run(
        [
            "nice",
            "-n",
            "19",
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            # Chromium's own background traffic (network time, components, reporting): off,
            # so that whatever reaches the proxy comes from the page.
            "--disable-component-update",
            "--disable-domain-reliability",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--disable-client-side-phishing-detection",
            "--no-service-autorun",
            "--no-pings",
            "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter",
            f"--user-data-dir={profile_dir}",
            f"--proxy-server=http://127.0.0.1:{proxy.port}",
            "--proxy-bypass-list=<-loopback>",
            *mode,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


class Structure(HTMLParser):
    """Section ids, their h2 headings, and the ids of figures that hold an <svg>."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.headings: dict[str, str] = {}
        self.plots: list[str] = []
        self._figure: str | None = None
        self._in_h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if tag == "section":
            self.sections.append(str(attr.get("id")))
        elif tag == "h2":
            self._in_h2 = True
            self.headings[self.sections[-1]] = ""
        elif tag == "figure":
            self._figure = attr.get("id")
        elif tag == "svg" and self._figure:
            self.plots.append(self._figure)
            self._figure = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._in_h2 = False

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            self.headings[self.sections[-1]] += data


def test_report_renders_in_chromium_without_network(tmp_path: Path, recorder: Recorder) -> None:
    with tuned_store(tmp_path / "runs.db") as store:
        report = write_report(
            store, "t1", tmp_path / "report", profile=PROFILE, profile_source="profile.json"
        )
    dom = chromium(report.path, tmp_path / "chromium", recorder, "--dump-dom")
    page = Structure()
    page.feed(dom)
    assert page.sections == list(SECTIONS)
    titles = {s.id: s.title for s in report.sections}
    assert {k: v.strip() for k, v in page.headings.items()} == titles
    assert page.plots == list(PLOTS)
    assert report.headline in dom
    assert recorder.from_page() == [], recorder.requests

    shot = tmp_path / "page.png"
    chromium(
        report.path,
        tmp_path / "chromium",
        recorder,
        "--window-size=1200,3000",
        f"--screenshot={shot}",
    )
    from PIL import Image

    with Image.open(shot) as image:
        colours = image.convert("RGB").resize((60, 150)).getcolors(maxcolors=100_000)
    assert colours is not None and len(colours) > 50  # tables and plots, not a blank page
    assert recorder.from_page() == [], recorder.requests


def test_the_recorder_sees_a_page_that_fetches(tmp_path: Path, recorder: Recorder) -> None:
    page = tmp_path / "fetches.html"
    page.write_text('<!doctype html><p>remote</p><img src="http://example.invalid/x.png">')
    chromium(page, tmp_path / "chromium", recorder, "--dump-dom")
    assert any("example.invalid" in line for line in recorder.requests), recorder.requests
