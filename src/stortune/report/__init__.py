"""Reports a person reads: one self-contained HTML page per campaign."""

from stortune.report.html import write_report

__all__ = ["write_report"]
