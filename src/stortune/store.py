"""The results store: campaigns, trials (one config each), runs (one row per repetition).

SQLite by default (one file, WAL journal), or any SQLAlchemy URL such as PostgreSQL when several
machines write to one campaign. Every run is committed on its own as soon as it finishes, so a
crash, a Ctrl-C or a full disk loses at most the run in progress.

Vocabulary: a *campaign* is one job (a tuning session, a sweep, an imported dataset); a *trial*
is one config the campaign evaluated (sequence number `seq`), with a summary of its runs; a *run*
is one measurement of one workload, one repetition. A *lease* says which process is measuring a
campaign (`measure/lease.py`), so that two never measure the same one at once.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from stortune.enums import PLACEHOLDERS, CampaignStatus, RunStatus, TrialStatus
from stortune.errors import StoreError
from stortune.storecells import (
    JsonCell,
    campaign_fields,
    check_fingerprint,
    run_fields,
    trial_fields,
)
from stortune.values import plain

if TYPE_CHECKING:
    import pandas as pd

    from stortune.datasets import Dataset

SCHEMA_VERSION = 3  # 1: stores made before the schema had a version (no meta table)

metadata = sa.MetaData()

meta = sa.Table(
    "meta",
    metadata,
    sa.Column("key", sa.String(80), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

campaigns = sa.Table(
    "campaigns",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("kind", sa.String(40), nullable=False),
    sa.Column("space_name", sa.String(200), nullable=False),
    sa.Column("space_yaml", sa.Text, nullable=False),
    sa.Column("target", JsonCell, nullable=False),
    sa.Column("workload", JsonCell, nullable=False),
    sa.Column("objective", JsonCell, nullable=False),
    sa.Column("tuner", sa.String(80), nullable=False),
    sa.Column("seed", sa.Integer, nullable=False),
    sa.Column("settings", JsonCell, nullable=False),
    sa.Column("status", sa.String(40), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

trials = sa.Table(
    "trials",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("config", JsonCell, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("value", sa.Float),
    sa.Column("summary", JsonCell),
    sa.Column("error", sa.Text),
    sa.Column("info", JsonCell),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("finished_at", sa.Float),
    sa.UniqueConstraint("campaign_id", "seq"),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False),
    sa.Column("trial_id", sa.Integer, sa.ForeignKey("trials.id"), nullable=False),
    sa.Column("workload", sa.String(200), nullable=False),
    sa.Column("repetition", sa.Integer, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("metrics", JsonCell, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("info", JsonCell),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float, nullable=False),
    sa.UniqueConstraint("trial_id", "workload", "repetition"),
)

environments = sa.Table(
    "environments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False),
    sa.Column("recorded_at", sa.Float, nullable=False),
    sa.Column("fingerprint", JsonCell, nullable=False),
)

leases = sa.Table(
    "leases",
    metadata,
    sa.Column(
        "campaign_id",
        sa.Integer,
        sa.ForeignKey("campaigns.id"),
        primary_key=True,
        autoincrement=False,
    ),
    sa.Column("token", sa.String(64), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("pid_space", sa.String(200), nullable=False),
    sa.Column("acquired_at", sa.Float, nullable=False),
    sa.Column("heartbeat_at", sa.Float, nullable=False),
)

sa.Index("ix_trials_campaign", trials.c.campaign_id)
sa.Index("ix_runs_trial", runs.c.trial_id)
sa.Index("ix_runs_campaign", runs.c.campaign_id)


@dataclass
class Campaign:
    id: int
    name: str
    kind: str
    space_name: str
    space_yaml: str
    target: dict[str, Any]
    workload: dict[str, Any]
    objective: dict[str, Any]
    tuner: str
    seed: int
    settings: dict[str, Any]
    status: str
    created_at: float
    updated_at: float

    @property
    def metric(self) -> str:
        return self.objective.get("metric", "")

    @property
    def direction(self) -> str:
        return self.objective.get("direction", "max")


@dataclass(frozen=True)
class Lease:
    """Who measures a campaign: a process (`pid` on `host`, whose pids `pid_space` names), a
    token of its own, and when it last said it is alive (`heartbeat_at`, its clock)."""

    campaign_id: int
    token: str
    host: str
    pid: int
    pid_space: str
    acquired_at: float
    heartbeat_at: float


@dataclass
class Run:
    id: int
    trial_id: int
    workload: str
    repetition: int
    status: str
    metrics: dict[str, float]
    error: str | None
    info: dict[str, Any] | None
    started_at: float
    ended_at: float


@dataclass
class Trial:
    id: int
    seq: int
    config: dict[str, Any]
    status: str
    value: float | None
    summary: dict[str, Any] | None
    error: str | None
    info: dict[str, Any] | None
    created_at: float
    finished_at: float | None
    runs: list[Run] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.status != TrialStatus.PENDING


def normalize_url(url_or_path: str) -> str:
    """A plain path means a SQLite file; anything with '://' is a SQLAlchemy URL."""
    if "://" in url_or_path:
        return url_or_path
    try:
        return f"sqlite:///{Path(url_or_path).expanduser().resolve()}"
    except (OSError, RuntimeError, ValueError) as exc:  # a NUL byte, a symlink loop, no home
        raise StoreError(f"cannot open the store {url_or_path!r}: {_reason(exc)}") from None


_SCHEMA_ATTEMPTS = 12  # tries at creating the tables while other processes do the same
_TRANSIENT = ("already exists", "database is locked", "UNIQUE", "disk I/O error")


class Store:
    """The results database (see the module doc)."""

    def __init__(self, url: str, existing: bool = False) -> None:
        """`existing`: the store must be there already (commands that only read it must not
        leave an empty file behind a mistyped path)."""
        self.url = normalize_url(url)
        self._new_file = _new_sqlite_file(self.url)  # removed again if the command is refused
        self.engine = _make_engine(self.url, existing)
        for attempt in range(_SCHEMA_ATTEMPTS):
            try:
                older = sa.inspect(self.engine).has_table("campaigns")
                tables = set(sa.inspect(self.engine).get_table_names())
                foreign = sorted(tables - set(metadata.tables))
                if (
                    self.engine.dialect.name == "sqlite"
                    and tables
                    and (foreign or not self._marked(tables))
                ):
                    # a SQLite file of another program: adding stortune's tables would alter it
                    raise StoreError(
                        f"cannot open the store {self.url}: it is another program's database "
                        f"(tables {', '.join((foreign or sorted(tables))[:5])}), not a stortune "
                        "store; it is left as it was"
                    )
                metadata.create_all(self.engine)
                self.schema_version = self._settle_version(older)
                break
            except sa.exc.SQLAlchemyError as exc:
                # Processes opening a new store at once race to create the tables: a loser sees
                # "already exists", or, in SQLite, "locked" (its read of the schema went stale
                # and SQLite refuses the write without waiting); it checks again shortly. SQLite
                # also says "disk I/O error" when it opens a WAL file that the last connection of
                # another process is deleting; a real I/O error lasts through the retries.
                text = str(exc)
                racing = any(m in text for m in _TRANSIENT)
                if racing and attempt < _SCHEMA_ATTEMPTS - 1:
                    time.sleep(min(2.0, 0.05 * 2**attempt))  # about 13 s in all
                    continue
                raise StoreError(f"cannot open the store {self.url}: {_reason(exc)}") from None
            except (ValueError, TypeError, KeyError) as exc:
                # rows stortune did not write (a schema version that is no number), or a driver
                # option in the URL of the wrong type (sqlite:///x.db?timeout=soon)
                raise StoreError(f"cannot open the store {self.url}: {_reason(exc)}") from None

    def _marked(self, tables: set[str]) -> bool:
        """Whether stortune's own tables mark the file as a store (or one another process is
        creating: `meta` comes first, then `campaigns`): a file with only a table that happens
        to share a name with one of stortune's (`runs`) is another program's."""
        if "campaigns" in tables:
            return True
        if "meta" not in tables:
            return False
        columns = {c["name"] for c in sa.inspect(self.engine).get_columns("meta")}
        return columns == set(meta.c.keys())

    def _settle_version(self, older: bool) -> int:
        """The store's schema version, after upgrading an older store in one transaction."""
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.select(meta.c.value).where(meta.c.key == "schema_version")
            ).first()
            version = int(row.value) if row else (1 if older else SCHEMA_VERSION)
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"the store {self.url} was written by a newer stortune (schema {version}; "
                    f"this one reads up to {SCHEMA_VERSION}): upgrade stortune to open it"
                )
            for step in range(version, SCHEMA_VERSION):
                UPGRADES[step](conn)
            if row is None:
                conn.execute(meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
            elif version < SCHEMA_VERSION:
                conn.execute(
                    meta.update()
                    .where(meta.c.key == "schema_version")
                    .values(value=str(SCHEMA_VERSION))
                )
        return SCHEMA_VERSION

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        """Close; a store this command created and that a refusal left empty is removed (a
        refused command creates nothing)."""
        empty = False
        if kind is not None and self._new_file is not None:
            with suppress(sa.exc.SQLAlchemyError):
                empty = not self.campaigns()
        self.close()
        if empty and self._new_file is not None:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with suppress(OSError):
                    Path(f"{self._new_file}{suffix}").unlink()

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.IntegrityError:
            raise
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"cannot write to the store {self.url}: {_reason(exc)}") from None

    # ---- campaigns ------------------------------------------------------------------------
    def create_campaign(
        self,
        name: str,
        *,
        kind: str,
        space_name: str,
        space_yaml: str,
        target: Mapping[str, Any],
        workload: Mapping[str, Any],
        objective: Mapping[str, Any],
        tuner: str = "",
        seed: int = 0,
        settings: Mapping[str, Any] | None = None,
    ) -> Campaign:
        now = time.time()
        row = dict(
            name=name,
            kind=kind,
            space_name=space_name,
            space_yaml=space_yaml,
            target=_jsonable(target),
            workload=_jsonable(workload),
            objective=_jsonable(objective),
            tuner=tuner,
            seed=int(seed),
            settings=_jsonable(settings or {}),
            status=CampaignStatus.RUNNING,
            created_at=now,
            updated_at=now,
        )
        try:
            with self._tx() as conn:
                conn.execute(campaigns.insert().values(**row))
        except sa.exc.IntegrityError:
            raise StoreError(
                f"campaign {name!r} already exists in {self.url} "
                "(use --resume to continue it, or choose another --name)"
            ) from None
        return self.campaign(name)

    def campaign(self, name: str) -> Campaign:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(campaigns).where(campaigns.c.name == name)).first()
        if row is None:
            known = [c.name for c in self.campaigns()]
            listing = ", ".join(known[-10:]) if known else "none"
            raise StoreError(f"no campaign {name!r} in {self.url} (campaigns: {listing})")
        return Campaign(**campaign_fields(row._mapping, self.url))

    def campaigns(self) -> list[Campaign]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(campaigns).order_by(campaigns.c.id)).all()
        return [Campaign(**campaign_fields(r._mapping, self.url)) for r in rows]

    def set_status(self, campaign_id: int, status: str) -> None:
        self.update_campaign(campaign_id, status=str(status))

    def update_campaign(self, campaign_id: int, **fields: Any) -> None:
        """Change stored fields of a campaign (status, settings, objective)."""
        unknown = set(fields) - {"status", "settings", "objective"}
        if unknown:
            raise StoreError(f"a campaign's {', '.join(sorted(unknown))} cannot be changed")
        values = {k: (_jsonable(v) if k != "status" else v) for k, v in fields.items()}
        with self._tx() as conn:
            conn.execute(
                campaigns.update()
                .where(campaigns.c.id == campaign_id)
                .values(**values, updated_at=time.time())
            )

    def record_environment(self, campaign_id: int, fingerprint: Mapping[str, Any]) -> None:
        with self._tx() as conn:
            conn.execute(
                environments.insert().values(
                    campaign_id=campaign_id,
                    recorded_at=time.time(),
                    fingerprint=_jsonable(fingerprint),
                )
            )

    def environments(self, campaign_id: int) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(environments.c.recorded_at, environments.c.fingerprint)
                .where(environments.c.campaign_id == campaign_id)
                .order_by(environments.c.id)
            ).all()
        named = self._name_of(campaign_id) if rows else ""
        return [
            {"recorded_at": r.recorded_at, **check_fingerprint(r.fingerprint, named, self.url)}
            for r in rows
        ]

    # ---- leases: which process measures a campaign (measure/lease.py) ----------------------
    def lease(self, campaign_id: int) -> Lease | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(leases).where(leases.c.campaign_id == campaign_id)).first()
        return None if row is None else Lease(**row._mapping)

    def claim_lease(self, lease: Lease, replacing: str | None = None) -> bool:
        """Take a campaign's lease when no one holds it (`replacing` None), or from the holder
        whose token is `replacing`. False when another process got there first: the insert, or
        the update on the old token, is one atomic step on SQLite and PostgreSQL alike."""
        values = asdict(lease)
        try:
            with self._tx() as conn:
                if replacing is None:
                    conn.execute(leases.insert().values(**values))
                    return True
                done = conn.execute(
                    leases.update()
                    .where(leases.c.campaign_id == lease.campaign_id, leases.c.token == replacing)
                    .values(**values)
                )
                return done.rowcount == 1
        except sa.exc.IntegrityError:
            return False

    def renew_lease(self, campaign_id: int, token: str, at: float) -> bool:
        """Move the heartbeat of `token`'s lease to `at`; False when the lease is not its now."""
        with self._tx() as conn:
            done = conn.execute(
                leases.update()
                .where(leases.c.campaign_id == campaign_id, leases.c.token == token)
                .values(heartbeat_at=at)
            )
        return done.rowcount == 1

    def release_lease(self, campaign_id: int, token: str) -> None:
        """Give up `token`'s lease (nothing happens when another process holds it now)."""
        with self._tx() as conn:
            conn.execute(
                leases.delete().where(leases.c.campaign_id == campaign_id, leases.c.token == token)
            )

    # ---- trials and runs ------------------------------------------------------------------
    def add_trial(
        self, campaign_id: int, seq: int, config: Mapping[str, Any], info: Mapping | None = None
    ) -> int:
        with self._tx() as conn:
            result = conn.execute(
                trials.insert().values(
                    campaign_id=campaign_id,
                    seq=seq,
                    config=_jsonable(config),
                    status=TrialStatus.PENDING,
                    info=_jsonable(info or {}),
                    created_at=time.time(),
                )
            )
            return int(result.inserted_primary_key[0])

    def add_trials(
        self, campaign_id: int, design: list[tuple[int, Mapping[str, Any], Mapping | None]]
    ) -> None:
        """Store pending trials (seq, config, info) in one transaction: a process killed while
        storing a design leaves all of it or none, never a part a resume would take as whole."""
        now = time.time()
        rows = [
            dict(
                campaign_id=campaign_id,
                seq=seq,
                config=_jsonable(config),
                status=TrialStatus.PENDING,
                info=_jsonable(info or {}),
                created_at=now,
            )
            for seq, config, info in design
        ]
        if rows:
            with self._tx() as conn:
                conn.execute(trials.insert(), rows)

    def finish_trial(
        self,
        trial_id: int,
        status: str,
        value: float | None = None,
        summary: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        with self._tx() as conn:
            conn.execute(
                trials.update()
                .where(trials.c.id == trial_id)
                .values(
                    status=status,
                    value=_finite(value),
                    summary=_jsonable(summary) if summary is not None else None,
                    error=error,
                    finished_at=time.time(),
                )
            )

    def delete_campaign(self, name: str) -> int:
        """Remove a campaign with its trials, runs and environments; returns its run count."""
        campaign = self.campaign(name)
        count = self.run_count(campaign.id)
        with self._tx() as conn:
            _delete_campaign_rows(conn, campaign.id)
        return count

    def rename_campaign(self, name: str, new_name: str) -> None:
        """Give a campaign another name (refused when that name is taken)."""
        campaign = self.campaign(name)
        if not new_name.strip():
            raise StoreError("a campaign's name cannot be empty")
        try:
            with self._tx() as conn:
                conn.execute(
                    campaigns.update()
                    .where(campaigns.c.id == campaign.id)
                    .values(name=new_name, updated_at=time.time())
                )
        except sa.exc.IntegrityError:
            raise StoreError(f"campaign {new_name!r} already exists in {self.url}") from None

    def has_started(self, campaign_id: int) -> bool:
        """Whether a campaign ever began measuring (it recorded where it ran, or a run); its
        pending trials (a design, a verification's labels) do not count."""
        with self.engine.connect() as conn:
            for table in (environments, runs):
                found = conn.execute(
                    sa.select(table.c.id).where(table.c.campaign_id == campaign_id).limit(1)
                ).first()
                if found is not None:
                    return True
        return False

    def update_trial(self, trial_id: int, *, info: Mapping[str, Any]) -> None:
        """Replace a trial's info (what a plan decided about it)."""
        with self._tx() as conn:
            conn.execute(
                trials.update().where(trials.c.id == trial_id).values(info=_jsonable(info))
            )

    def add_run(
        self,
        campaign_id: int,
        trial_id: int,
        *,
        workload: str,
        repetition: int,
        status: str,
        metrics: Mapping[str, float],
        started_at: float,
        ended_at: float,
        error: str | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> int:
        """Record one finished run; committed before this returns. A placeholder in the same
        slot (trial, workload, repetition: a run stored as disturbed, or lost with its node) is
        replaced: it was never a result, and a resumed campaign measures that slot again. What
        it measured moves into the new run's ``info['replaced_disturbed']`` (the name predates
        lost runs), each with its status, so nothing measured is lost."""
        info = dict(info or {})
        with self._tx() as conn:
            slot = (
                runs.c.trial_id == trial_id,
                runs.c.workload == workload,
                runs.c.repetition == repetition,
                runs.c.status.in_([str(p) for p in PLACEHOLDERS]),
            )
            earlier = conn.execute(sa.select(runs).where(*slot)).all()
            if earlier:
                info["replaced_disturbed"] = [
                    {
                        "status": row.status,
                        "reason": row.error,
                        "metrics": row.metrics,
                        "started_at": row.started_at,
                        "attempts": (row.info or {}).get("disturbed_attempts", []),
                    }
                    for row in earlier
                ]
                conn.execute(runs.delete().where(*slot))
            result = conn.execute(
                runs.insert().values(
                    campaign_id=campaign_id,
                    trial_id=trial_id,
                    workload=workload,
                    repetition=repetition,
                    status=status,
                    metrics=_jsonable(metrics),
                    error=error,
                    info=_jsonable(info),
                    started_at=started_at,
                    ended_at=ended_at,
                )
            )
            conn.execute(
                campaigns.update().where(campaigns.c.id == campaign_id).values(updated_at=ended_at)
            )
            return int(result.inserted_primary_key[0])

    def trials(self, campaign_id: int) -> list[Trial]:
        """All trials of a campaign in sequence order, each with its runs."""
        with self.engine.connect() as conn:
            trial_rows = conn.execute(
                sa.select(trials).where(trials.c.campaign_id == campaign_id).order_by(trials.c.seq)
            ).all()
            run_rows = conn.execute(
                sa.select(runs).where(runs.c.campaign_id == campaign_id).order_by(runs.c.id)
            ).all()
        named = self._name_of(campaign_id) if trial_rows or run_rows else ""
        by_trial: dict[int, list[Run]] = {}
        for r in run_rows:
            run = Run(**run_fields(r._mapping, named, self.url))
            by_trial.setdefault(run.trial_id, []).append(run)
        out = []
        for t in trial_rows:
            m = trial_fields(t._mapping, named, self.url)
            out.append(Trial(**m, runs=by_trial.get(m["id"], [])))
        return out

    def trial(self, trial_id: int) -> Trial:
        """One trial with its runs."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(trials).where(trials.c.id == trial_id)).first()
        if row is None:
            raise StoreError(f"no trial {trial_id} in {self.url}")
        fields = trial_fields(row._mapping, self._name_of(row.campaign_id), self.url)
        return Trial(**fields, runs=self.trial_runs(trial_id))

    def trial_runs(self, trial_id: int) -> list[Run]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(runs).where(runs.c.trial_id == trial_id).order_by(runs.c.id)
            ).all()
        named = self._name_of(rows[0].campaign_id) if rows else ""
        return [Run(**run_fields(r._mapping, named, self.url)) for r in rows]

    def _name_of(self, campaign_id: int) -> str:
        """A campaign's name by its id (what a message about its rows says)."""
        with self.engine.connect() as conn:
            name = conn.execute(
                sa.select(campaigns.c.name).where(campaigns.c.id == campaign_id)
            ).scalar()
        return str(name) if name is not None else f"#{campaign_id}"

    def run_count(self, campaign_id: int) -> int:
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count())
                    .select_from(runs)
                    .where(runs.c.campaign_id == campaign_id)
                ).scalar_one()
            )

    # ---- tables ---------------------------------------------------------------------------
    def runs_frame(self, campaign_name: str, include_failed: bool = True) -> pd.DataFrame:
        """A tidy table: one row per run, bookkeeping columns ``run.*``, one column per
        parameter, metric columns ``metric.<name>`` (the export format, see datasets.py)."""
        import pandas as pd

        from stortune.datasets import METRIC_PREFIX, RUN_PREFIX

        campaign = self.campaign(campaign_name)
        rows = []
        param_names: list[str] = []
        for trial in self.trials(campaign.id):
            for name in trial.config:
                if name not in param_names:
                    param_names.append(name)
            for run in trial.runs:
                if not include_failed and run.status != RunStatus.OK:
                    continue
                row: dict[str, Any] = {
                    f"{RUN_PREFIX}id": run.id,
                    f"{RUN_PREFIX}trial": trial.seq,
                    f"{RUN_PREFIX}workload": run.workload,
                    f"{RUN_PREFIX}repetition": run.repetition,
                    f"{RUN_PREFIX}status": run.status,
                    f"{RUN_PREFIX}started_at": pd.Timestamp(run.started_at, unit="s", tz="UTC"),
                    f"{RUN_PREFIX}seconds": run.ended_at - run.started_at,
                    f"{RUN_PREFIX}error": run.error or "",
                }
                row.update(trial.config)
                row.update({f"{METRIC_PREFIX}{k}": v for k, v in run.metrics.items()})
                rows.append(row)
        frame = pd.DataFrame(rows)
        if frame.empty:
            return frame
        meta = [c for c in frame.columns if c.startswith(RUN_PREFIX)]
        metrics = sorted(c for c in frame.columns if c.startswith(METRIC_PREFIX))
        params = [c for c in param_names if c in frame.columns]
        return frame[meta + params + metrics]

    def import_dataset(self, name: str, dataset: Dataset, space_yaml: str, space_name: str) -> int:
        """Store a dataset as a campaign of kind 'dataset': a trial per distinct config, a run per
        row. Returns the number of runs stored. One transaction: a kill or a full disk leaves
        nothing of it. A dataset campaign of that name still running is what an older release
        left of an import stopped midway (it committed the campaign first): it is replaced."""
        configs, rows = _dataset_rows(dataset)
        now = time.time()
        try:
            with self.engine.begin() as conn:
                _drop_unfinished_import(conn, name)
                campaign_id = conn.execute(
                    campaigns.insert().values(
                        name=name,
                        kind="dataset",
                        space_name=space_name,
                        space_yaml=space_yaml,
                        target=_jsonable({"kind": "table", "source": dataset.source}),
                        workload={},
                        objective=_jsonable(
                            {"metric": dataset.metrics[0], "direction": dataset.direction()}
                        ),
                        tuner="",
                        seed=0,
                        settings=_jsonable({"source": dataset.source, "metrics": dataset.metrics}),
                        status=CampaignStatus.FINISHED,
                        created_at=now,
                        updated_at=now,
                    )
                ).inserted_primary_key[0]
                conn.execute(
                    trials.insert(),
                    [
                        dict(
                            campaign_id=campaign_id, seq=seq, config=config,
                            status=TrialStatus.OK, info={}, created_at=now, finished_at=now,
                        )
                        for seq, config in enumerate(configs)
                    ],
                )  # fmt: skip
                trial_ids = dict(
                    conn.execute(
                        sa.select(trials.c.seq, trials.c.id).where(
                            trials.c.campaign_id == campaign_id
                        )
                    ).all()
                )
                for start in range(0, len(rows), _IMPORT_BATCH):
                    conn.execute(
                        runs.insert(),
                        [
                            dict(
                                campaign_id=campaign_id, trial_id=trial_ids[seq],
                                workload=workload, repetition=rep, status=RunStatus.OK,
                                metrics=metrics, info={}, started_at=now, ended_at=now,
                            )
                            for seq, workload, rep, metrics in rows[start : start + _IMPORT_BATCH]
                        ],
                    )  # fmt: skip
        except sa.exc.IntegrityError:
            raise StoreError(
                f"campaign {name!r} already exists in {self.url} (choose another --name, or "
                f"delete it first: stortune campaigns delete {name})"
            ) from None
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(
                f"cannot import {name!r} into the store {self.url}: {_reason(exc)}; nothing was "
                "imported"
            ) from None
        return len(rows)


_IMPORT_BATCH = 10_000  # runs per INSERT statement of an import


def _dataset_rows(
    dataset: Dataset,
) -> tuple[list[dict[str, Any]], list[tuple[int, str, int, dict[str, Any]]]]:
    """A dataset's distinct configs in the order they first appear, and its rows in file order
    as runs: (config's index, workload, repetition within config and workload, metrics)."""
    from stortune.datasets import RUN_PREFIX

    frame = dataset.frame
    seqs = frame.groupby(dataset.params, dropna=False, sort=False).ngroup().tolist()
    params = {p: frame[p].tolist() for p in dataset.params}
    metrics = {m: frame[m].tolist() for m in dataset.metrics}
    workload_col = f"{RUN_PREFIX}workload"
    if workload_col in frame.columns:
        workloads = [str(w) for w in frame[workload_col].tolist()]
    else:
        workloads = [""] * len(frame)
    configs: dict[int, dict[str, Any]] = {}
    reps: dict[tuple[int, str], int] = {}
    rows = []
    for i, seq in enumerate(seqs):
        if seq not in configs:
            configs[seq] = _jsonable({p: plain(params[p][i]) for p in dataset.params})
        rep = reps.get((seq, workloads[i]), 0)
        reps[(seq, workloads[i])] = rep + 1
        rows.append((seq, workloads[i], rep, {m: _cell(metrics[m][i]) for m in dataset.metrics}))
    return [configs[seq] for seq in range(len(configs))], rows


def _drop_unfinished_import(conn: Connection, name: str) -> None:
    """Remove a dataset campaign `name` that is still running: a stopped import's remains."""
    row = conn.execute(
        sa.select(campaigns.c.id).where(
            campaigns.c.name == name,
            campaigns.c.kind == "dataset",
            campaigns.c.status == CampaignStatus.RUNNING,
        )
    ).first()
    if row is not None:
        _delete_campaign_rows(conn, row.id)


def _delete_campaign_rows(conn: Connection, campaign_id: int) -> None:
    """A campaign with its trials, runs, environments and lease."""
    for table in (runs, trials, environments, leases):
        conn.execute(table.delete().where(table.c.campaign_id == campaign_id))
    conn.execute(campaigns.delete().where(campaigns.c.id == campaign_id))


def _new_sqlite_file(url: str) -> Path | None:
    """The SQLite file a URL names when it does not exist yet (None: it does, or no file)."""
    if not url.startswith("sqlite:///"):
        return None
    path = Path(url[len("sqlite:///") :].split("?", 1)[0])
    try:
        return None if str(path) in ("", ":memory:") or path.exists() else path
    except (OSError, ValueError):
        return None


def _make_engine(url: str, existing: bool = False) -> Engine:
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :])
        try:
            missing = str(path) not in ("", ":memory:") and not path.parent.exists()
            absent = existing and str(path) not in ("", ":memory:") and not path.exists()
            # SQLite takes a file shorter than its header for an empty database and writes
            # over it: a file that is not SQLite's stays untouched
            head = b""
            if path.is_file():
                with path.open("rb") as f:
                    head = f.read(16)
        except (OSError, ValueError) as exc:  # a name too long, a NUL byte, no permission
            raise StoreError(f"cannot open the store {url!r}: {_reason(exc)}") from None
        if missing:
            raise StoreError(f"cannot open the store {url}: folder {path.parent} does not exist")
        if absent:
            raise StoreError(
                f"no store at {path}: a measuring command (run, tune, sweep, import) makes one"
            )
        if head and head != b"SQLite format 3\x00":
            raise StoreError(f"cannot open the store {url}: the file is not a SQLite database")
    try:
        engine = sa.create_engine(url)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError, ValueError) as exc:
        # ValueError: a URL whose port is no number (postgresql://host:abc/x)
        hint = ""
        if isinstance(exc, ImportError) and url.startswith("postgresql"):
            hint = " (the PostgreSQL driver is an extra: pip install 'stortune[postgres]')"
        raise StoreError(f"cannot use the store URL {url!r}: {_reason(exc)}{hint}") from None
    if engine.dialect.name == "sqlite":

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

    return engine


def _reason(exc: BaseException) -> str:
    """The driver's own message, first line only (SQLAlchemy appends long background links)."""
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    code = getattr(inner, "sqlite_errorname", "")  # which I/O failed: SQLITE_IOERR_SHMMAP, ...
    return f"{first} ({code})" if code.startswith("SQLITE_IOERR_") else first


def _cell(value: Any) -> Any:
    """A dataset's cell as stored JSON takes it: plain Python, None for NaN and infinities."""
    value = plain(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _jsonable(data: Any) -> Any:
    """Plain JSON types only (numpy scalars, NaN and infinities become plain/None)."""
    return json.loads(json.dumps(data, default=_plain_default), parse_constant=lambda _c: None)


def _plain_default(value: Any) -> Any:
    """`json.dumps`'s fallback: plain Python where there is one, else the text."""
    made = plain(value)
    return str(value) if made is value else made


# ---- schema upgrades: UPGRADES[n] brings a store from version n to n + 1 ---------------------
def _upgrade_1_to_2(conn: Connection) -> None:
    """Version 2 stores targets by their settings and objectives with their scalarisation:
    a multi-objective campaign's ``scalarized`` target becomes its inner target plus an
    objective holding the scalarizer; a command target's ``argv`` is its ``command``; a table
    target's ``metrics`` (stored without the ``metric.`` prefix its file has, so no resume
    found them) are left to the file's own conventions."""
    for row in conn.execute(sa.select(campaigns.c.id, campaigns.c.target, campaigns.c.objective)):
        target, objective = dict(row.target or {}), dict(row.objective or {})
        while target.get("kind") == "scalarized":
            objective = {
                "metric": objective.get("metric", "score"),
                "direction": "max",
                "scalarizer": target.get("scalarizer", {}),
            }
            target = dict(target.get("inner") or {})
        if target.get("kind") == "command" and "argv" in target:
            target["command"] = target.pop("argv")
        if target.get("kind") == "table":
            target.pop("metrics", None)
        conn.execute(
            campaigns.update()
            .where(campaigns.c.id == row.id)
            .values(target=_jsonable(target), objective=_jsonable(objective))
        )


def _upgrade_2_to_3(conn: Connection) -> None:
    """Version 3 keeps which process measures a campaign (the ``leases`` table); nothing
    stored before changes."""
    leases.create(conn, checkfirst=True)


UPGRADES: dict[int, Any] = {1: _upgrade_1_to_2, 2: _upgrade_2_to_3}
