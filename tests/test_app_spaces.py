"""The application spaces (PostgreSQL's and RocksDB's own options, alone and composed with the
stack): which layer applies what, the files a recommendation installs, and that a risky
application option is never proposed unless risk is allowed."""

from __future__ import annotations

import math

import pytest

from stortune.sampling import latin_hypercube
from stortune.space import Application, load_space
from stortune.space.risk import risks_of, risky_variants, safe_space
from stortune.targets.localfs import LocalFsTarget
from stortune.tuners import make_tuner

APP_SPACES = ("postgres-stack", "rocksdb-stack")


@pytest.mark.parametrize("name", APP_SPACES)
def test_a_joint_space_holds_the_stack_and_the_application(name: str) -> None:
    space = load_space(name)
    app = Application(name.removesuffix("-stack"))
    own = [p for p in space.parameters if p.application is app]
    assert len(own) >= 15
    assert {"fs", "scheduler", "read_ahead_kb"} <= set(space.names)
    assert all(p.applied_by_workload for p in own)
    assert not any(p.applied_by_workload for p in space.parameters if p.application is None)


def test_the_target_leaves_application_options_to_the_workload() -> None:
    space = load_space("postgres-stack")
    config = space.validate(
        {**space.default_config(), "shared_buffers": 192, "synchronous_commit": "off"}
    )
    plan = LocalFsTarget(space, image_size="4g").changes(config)
    assert not plan.mount and not plan.vm and not plan.block  # nothing of the stack changed
    values = space.workload_values(config)
    assert values["shared_buffers"] == "192MB"  # the unit the server reads, from `format`
    assert values["synchronous_commit"] == "off"
    assert values["fsync"] is True  # a bool stays a bool: the workload writes on/off
    assert "fs" not in values and "scheduler" not in values


def test_a_postgres_recommendation_prints_postgresql_conf_lines_and_says_restart() -> None:
    space = load_space("postgres-stack")
    config = {**space.default_config(), "shared_buffers": 192, "wal_compression": "lz4"}
    config["fs"] = "xfs"
    files = {f.path: f for f in LocalFsTarget.install_files(space.validate(config), space)}
    assert {"etc/fstab", "postgresql.conf"} <= set(files)
    conf = files["postgresql.conf"]
    assert conf.text.splitlines() == ["shared_buffers = '192MB'", "wal_compression = 'lz4'"]
    assert "restart" in conf.how and "shared_buffers" in conf.how
    reload_only = {**space.default_config(), "checkpoint_timeout": 900}
    conf = {f.path: f for f in LocalFsTarget.install_files(reload_only, space)}["postgresql.conf"]
    assert conf.text == "checkpoint_timeout = '900s'\n"
    assert "reload" in conf.how and "restart" not in conf.how


def test_a_rocksdb_recommendation_places_each_option_where_rocksdb_reads_it() -> None:
    space = load_space("rocksdb-stack")
    config = space.validate(
        {**space.default_config(), "bloom_bits": 10, "compaction_style": "universal",
         "max_background_jobs": 4, "sync": False}
    )  # fmt: skip
    files = {f.path: f.text for f in LocalFsTarget.install_files(config, space)}
    assert "etc/fstab" not in files  # the stack is at its defaults
    ini = files["OPTIONS.ini"]
    assert "[DBOptions]\n  max_background_jobs=4\n" in ini
    assert "compaction_style=kCompactionStyleUniversal" in ini
    assert "filter_policy=bloomfilter:10:false" in ini
    assert files["WriteOptions"] == "disableWAL=false\nsync=false\n"
    assert "--compaction_style=1" in files["db_bench.flags"]  # db_bench's number for it
    # the whole set, even at the space's defaults: db_bench's and the space's defaults are
    # not the library's (a synced WAL, an 8 MiB block cache)
    default = {f.path: f.text for f in LocalFsTarget.install_files(space.default_config(), space)}
    assert default["WriteOptions"] == "disableWAL=false\nsync=true\n"
    assert "block_cache=8388608" in default["OPTIONS.ini"]
    assert "filter_policy" not in default["OPTIONS.ini"]  # -1: no filter, nothing to set


@pytest.mark.parametrize("name", APP_SPACES)
def test_no_risky_value_is_proposed_unless_risk_is_allowed(name: str) -> None:
    """1,000 proposals of each kind a campaign makes over the safe joint space (what `tune`
    searches without --allow-risk): random search, TPE told values, the ranking's Latin
    hypercube, and the risky variants measured beside a result never count as proposals."""
    space = load_space(name)
    safe = safe_space(space)
    proposals = []
    for tuner_name in ("random", "tpe"):
        tuner = make_tuner(tuner_name, safe, seed=1)
        for i in range(690 if tuner_name == "random" else 60):
            config = tuner.ask()
            tuner.tell(config, float(math.sin(i) + 2))
            proposals.append(config)
    proposals += latin_hypercube(safe, 250, seed=2).configs
    assert len(proposals) == 1000
    assert [c for c in proposals if risks_of(space, c)] == []
    # the same proposals over the whole space do hold risky values: the check can fail
    anything = make_tuner("random", space, seed=1)
    assert any(risks_of(space, anything.ask()) for _ in range(200))


def test_risky_variants_of_a_config_are_the_application_options_alone() -> None:
    space = load_space("postgres-stack")
    best = space.validate({**space.default_config(), "shared_buffers": 192})
    variants = risky_variants(space, best, application_only=True)
    assert set(variants) == {
        "risky fsync=false",
        "risky synchronous_commit=off",
        "risky full_page_writes=false",
    }
    for config in variants.values():
        assert config["shared_buffers"] == 192
        assert len(risks_of(space, config)) == 1
    every = risky_variants(space, best)
    assert "risky ext4_barrier=false" in every and len(every) > len(variants)
