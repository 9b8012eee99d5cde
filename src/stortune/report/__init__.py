"""Reports a person reads: one self-contained HTML page per campaign.

The report renders; it computes nothing. `context` loads what a report reads, with what
`stortune.findings` derived from the campaign; `sections` builds one `Section` per part of the
page (each saying why when it has nothing), with figures from `stortune.plots` as inline SVG;
`headline` writes the one line, and `html` renders the template.
"""

from stortune.report.html import Report, write_report

__all__ = ["Report", "write_report"]
