"""The closed sets of values stortune stores and compares: directions, statuses, kinds.

They are `StrEnum`s, so a value read back from the store (a plain string) compares equal to its
member, and JSON and SQL see plain strings.
"""

from __future__ import annotations

from enum import StrEnum


class Direction(StrEnum):
    """Whether larger (max) or smaller (min) values of a metric are better."""

    MAX = "max"
    MIN = "min"

    @property
    def sign(self) -> float:
        """+1 for max, -1 for min: multiplies a value into "larger is better"."""
        return 1.0 if self is Direction.MAX else -1.0

    def better(self, a: float, b: float) -> bool:
        return a > b if self is Direction.MAX else a < b

    @classmethod
    def parse(cls, text: str, what: str = "direction") -> Direction:
        from stortune.errors import StortuneError

        try:
            return cls(text)
        except ValueError:
            raise StortuneError(f"{what} {text!r}: write max or min") from None


class RunStatus(StrEnum):
    """One run of one workload: a result, a failure, a hang, or spoilt by other work."""

    OK = "ok"
    FAILED = "failed"  # the benchmark crashed, printed nothing usable, or the config did not apply
    TIMEOUT = "timeout"  # killed at the per-run time limit
    DISTURBED = "disturbed"  # other work on the machine spoilt it: a placeholder, measured again
    LOST = "lost"  # the node measuring it died or left: a placeholder, measured on another node


# Runs that hold a slot without a result: measured again later, never counted in a value.
PLACEHOLDERS = (RunStatus.DISTURBED, RunStatus.LOST)


class TrialStatus(StrEnum):
    """One config of a campaign."""

    PENDING = "pending"  # runs still to come
    OK = "ok"  # at least one successful run of every workload
    FAILED = "failed"  # no value: the config did not apply, or no run of a workload succeeded
    INVALID = "invalid"  # the config breaks the space's rules; nothing was measured


class CampaignStatus(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"  # Ctrl-C, SIGTERM or a busy machine: --resume continues it
    FAILED = "failed"  # an error stopped it (a bug, or the target broke): --resume may continue


class CampaignKind(StrEnum):
    """What a campaign is, and so which plan measures it (and resumes it)."""

    TUNE = "tune"  # a tuner's asks
    SAMPLE = "sample"  # a Latin hypercube measured for a ranking (`rank --budget`, `tune --rank`)
    SWEEP = "sweep"  # a stored design, repetitions interleaved over configs
    NOISE = "noise"  # one config alternating with the reference
    VERIFY = "verify"  # default, best and compared configs re-measured interleaved
    DATASET = "dataset"  # imported rows: nothing to measure
    PROFILE = "profile"  # a SeRRa device profile


class StopReason(StrEnum):
    """Why a campaign's measuring stopped."""

    BUDGET = "budget"  # the plan is complete (every evaluation or slot measured)
    TIME = "time"  # the time budget was spent
    BUSY = "busy"  # the machine stayed busy past the wait limit
    NO_NODES = "no-nodes"  # no node of the cluster was left to measure on


class StartState(StrEnum):
    """The state a workload's timed part starts from, as its job file declares it."""

    COLD = "cold"  # files laid out before the timed part, the page cache dropped
    WARM = "warm"  # the job measures from memory on purpose: the page cache is kept


class RiskScope(StrEnum):
    """Which risky values a verification measures beside the recommended config, on the
    benchmark's own file system, so that the output says what each would buy (never
    recommending one): none, the application's own options (a database's fsync,
    synchronous_commit, an unsynced WAL), or every layer's."""

    NONE = "none"
    APPLICATION = "application"
    ALL = "all"
