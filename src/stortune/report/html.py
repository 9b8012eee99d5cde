"""`write_report`: one self-contained HTML page for a campaign.

The page is a jinja2 template with the CSS inline and every plot as inline SVG: it opens from
a file, a mail attachment or a CI artifact with no network and nothing beside it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from stortune import __version__
from stortune.report.context import load_context
from stortune.report.headline import headline as make_headline
from stortune.report.sections import Section, build_sections
from stortune.store import Store

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("stortune.report", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
    undefined=jinja2.StrictUndefined,
)
_CODE = re.compile(r"`([^`]+)`")


def prose(text: str) -> Markup:
    """A sentence escaped, with `command` spans shown as code."""
    return Markup(_CODE.sub(r"<code>\1</code>", str(escape(text))))


_ENV.filters["prose"] = prose


@dataclass
class Report:
    """A written report: where it is, its headline and its sections."""

    campaign: str
    path: Path
    headline: str
    sections: list[Section]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (NaN as null), SVG text left out."""
        from stortune.importance.common import jsonable

        return jsonable(
            {
                "campaign": self.campaign,
                "report": str(self.path),
                "headline": self.headline,
                "sections": [s.to_dict() for s in self.sections],
            }
        )


def file_name(campaign: str) -> str:
    """A campaign name made safe as a file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", campaign).strip("._") or "campaign"


def write_report(
    store: Store,
    campaign_name: str,
    out_dir: Path,
    *,
    workload: str | None = None,
    profile: dict[str, Any] | None = None,
    profile_source: str = "",
    subject: str = "",
) -> Report:
    """Write `<out_dir>/<campaign>.html` (a verify campaign reports the campaign it verified).

    `workload` picks the workload analysed when the campaign ran several (default: the first);
    `profile` is a device profile (`stortune profile` JSON) when the store holds none;
    `subject` names what was measured in the headline (default: workloads on file system).
    """
    ctx = load_context(store, campaign_name, workload, profile, profile_source, subject)
    sections = build_sections(ctx)
    headline = make_headline(ctx)
    html = _ENV.get_template("campaign.html.j2").render(
        c=ctx.campaign,
        headline=headline,
        sections=sections,
        version=__version__,
        written=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{file_name(ctx.campaign.name)}.html"
    path.write_text(html, encoding="utf-8")
    return Report(ctx.campaign.name, path, headline, sections)
