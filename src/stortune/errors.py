"""User-facing errors.

Every error a user can cause (bad space file, invalid config, missing campaign, a target that
cannot be reached) is a `StortuneError`: the CLI prints its message as one line and exits with
code 2, without a traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class StortuneError(Exception):
    """An error with a message meant for the user, one line, saying what and where."""

    exit_code = 2


class SpaceError(StortuneError):
    """A space file or space definition is malformed."""


class ConfigError(StortuneError):
    """A config does not fit its space: unknown parameter, bad value, violated constraint."""


class StoreError(StortuneError):
    """The results store cannot be opened, or a campaign is missing or inconsistent."""


class TargetError(StortuneError):
    """The system under test cannot be set up, configured or measured."""


class DatasetError(StortuneError):
    """A dataset file cannot be read or has no usable parameter/metric columns."""


class BusyError(StortuneError):
    """Another stortune benchmark holds the machine's lock."""


class CampaignBusy(StortuneError):
    """Another process holds the campaign's lease: it is measuring that campaign."""


class LeaseLost(StortuneError):
    """Another process took over the campaign's lease while this one measured it (this one's
    heartbeat had lapsed): this one stops without storing more."""


class Interrupted(StortuneError):
    """Ctrl-C or SIGTERM stopped a campaign; its finished runs are stored."""

    exit_code = 130

    def __init__(self, campaign: str) -> None:
        super().__init__(f"interrupted: campaign {campaign!r} keeps every finished run")
        self.campaign = campaign
