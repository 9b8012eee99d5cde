"""Reports a person reads: one self-contained HTML page per campaign.

`context` loads what a report reads, `sections` builds one `Section` per part of the page
(each saying why when it has nothing), `plots` draws inline SVG, `headline` writes the one
line, and `html` renders the template.
"""

from stortune.report.html import Report, write_report

__all__ = ["Report", "write_report"]
