"""Space cleaning from Ceph's metadata, on a saved sample of real `ceph config help` answers
(Ceph 16.2.15), and the bundled space and expert config it produced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stortune.ceph.conf import BASELINE, format_value, same_value
from stortune.cephspace import generate_space
from stortune.cephspace.configs import load_config
from stortune.cephspace.constraints import names_in
from stortune.cephspace.generate import effective_default
from stortune.cephspace.params import build, cost_of, layer_of
from stortune.cephspace.rules import Context, classify
from stortune.errors import ConfigError, TargetError
from stortune.space import Cost, Kind, load_space
from stortune.space.risk import risks_of, risky_values, safe_space
from stortune.targets.ceph import ceph_conf_section

SAMPLE = json.loads((Path(__file__).parent / "data" / "ceph-config-help-sample.json").read_text())
BY_NAME = {o["name"]: o for o in SAMPLE}
PINNED = {"public_addr", "admin_socket", "mon_warn_on_pool_no_redundancy"}


@pytest.fixture(scope="module")
def generated():
    return generate_space(SAMPLE, pinned=PINNED, overrides=BASELINE, version="16.2.15")


def verdict(name: str) -> tuple[str, str] | None:
    context = Context(pinned=PINNED, names=set(BY_NAME))
    return classify(BY_NAME[name], context)


@pytest.mark.parametrize(
    ("name", "kind", "reason"),
    [
        ("fsid", "washed", "identity or key"),
        ("keyring", "washed", "identity or key"),
        ("mon_host", "washed", "address, port or network"),
        ("ms_bind_port_min", "washed", "address, port or network"),
        ("public_addr", "washed", "set by the target"),
        ("osd_data", "washed", "path"),
        ("debug_asok_assert_abort", "washed", "debugging or logging"),
        ("log_to_file", "washed", "debugging or logging"),
        ("ms_inject_socket_failures", "washed", "testing or fault injection"),
        ("bluestore_rocksdb_options", "washed", "plain string"),
        ("mon_initial_members", "washed", "plain string"),
        ("mon_osd_full_ratio", "washed", "cannot be set through the monitor or after creation"),
        ("osd_numa_node", "washed", "machine placement (NUMA, CRUSH layout)"),
        ("perf", "washed", "needed for stortune's measurements (perf counters)"),
        ("osd_objectstore", "pruned", "module selector (held at the chosen module)"),
        ("filestore_max_sync_interval", "pruned", "object store not in use"),
        ("ms_async_rdma_buffer_size", "pruned", "messenger or device driver not in use"),
        ("rgw_thread_pool_size", "pruned", "service not in use (RGW, CephFS, RBD, ...)"),
        ("rbd_cache", "pruned", "service not in use (RGW, CephFS, RBD, ...)"),
        ("osd_tier_promote_max_bytes_sec", "pruned", "cache tiering or erasure coding not in use"),
        ("osd_pool_default_pg_num", "pruned", "pool creation default (the target makes its pool)"),
        ("bluestore_block_db_size", "pruned", "separate DB/WAL device not in use"),
        ("osd_op_num_shards_hdd", "pruned", "media-specific variant (its generic option is tuned)"),
        (
            "osd_mclock_max_capacity_iops_ssd",
            "washed",
            "measured by the OSD at startup (stored for osd.N, over any tuned value)",
        ),
    ],
)
def test_options_that_must_not_be_tuned_are_washed_or_pruned(name, kind, reason) -> None:
    assert verdict(name) == (kind, reason)


@pytest.mark.parametrize(
    "name", ["osd_op_num_shards", "bluestore_cache_size", "ms_async_op_threads", "osd_op_queue"]
)
def test_performance_options_are_kept(name: str) -> None:
    assert verdict(name) is None


def test_summary_counts_every_option_once(generated) -> None:
    space, cleaning = generated
    summary = cleaning.to_dict()
    assert summary["total"] == len(SAMPLE)
    assert summary["washed"] + summary["pruned"] + summary["left"] == len(SAMPLE)
    assert len(space) == summary["left"] + 1  # + pg_per_osd
    assert "options: 52 total" in cleaning.text()
    assert space.is_valid(space.default_config())


def test_bounds_declared_or_default_relative_and_extendable(generated) -> None:
    space, _ = generated
    threads = space["ms_async_op_threads"]  # declared [1, 24]: narrow next to its default
    assert (threads.low, threads.high, threads.extendable) == (1, 24, False)
    cap = space["osd_client_message_cap"]  # no bounds declared: default 256 -> [64, 1024]
    assert (cap.low, cap.high, cap.log, cap.extendable, cap.hard_low) == (64, 1024, True, True, 0)
    target = space["osd_memory_target"]  # declared min only: a hard bound
    assert target.low == target.hard_low == 939524096 and target.extendable
    alloc = space["bluestore_min_alloc_size"]  # powers of two around the _hdd default
    assert alloc.kind is Kind.ORDINAL and alloc.values == (4096, 8192, 16384)  # >= a block


def test_generic_options_take_the_media_default_and_the_target_baseline(generated) -> None:
    space, _ = generated
    assert space["osd_op_num_shards"].default == 5  # 0 means "use osd_op_num_shards_hdd"
    assert space["bluestore_cache_size"].default == int(BASELINE["bluestore_cache_size"])
    assert space["bluestore_cache_autotune"].default is False
    assert effective_default(BY_NAME["osd_op_num_shards"], BY_NAME, {}, rotational=False) == 8


def test_constraints_and_conditions_of_table_1(generated) -> None:
    space, _ = generated
    texts = {c.expression.text for c in space.constraints}
    assert "bluestore_cache_kv_ratio + bluestore_cache_meta_ratio <= 1" in texts
    assert "pg_per_osd <= mon_max_pg_per_osd" in texts
    assert "osd_min_pg_log_entries <= osd_max_pg_log_entries" in texts
    bundled = {c.describe() for c in load_space("ceph").constraints}
    assert any(
        "osd_memory_base + osd_memory_cache_min"
        " <= osd_memory_target * (1 - osd_memory_expected_fragmentation)" in c
        for c in bundled
    )
    assert not any("ms_async_max_op_threads" in t for t in texts)  # not an option in Pacific
    assert space["osd_mclock_profile"].condition.text == "osd_op_queue == 'mclock_scheduler'"
    assert space["bluestore_cache_size"].condition.text == "not bluestore_cache_autotune"
    with pytest.raises(ConfigError, match="kv_ratio"):
        space.validate({"bluestore_cache_kv_ratio": 0.7, "bluestore_cache_meta_ratio": 0.7})
    assert "debug_random" not in space["osd_op_queue"].values
    assert "zoned" not in space["bluestore_allocator"].values
    assert names_in("a + b <= c and d in ('x', 'y')") == {"a", "b", "c", "d"}


def test_layers_and_apply_costs() -> None:
    assert layer_of(BY_NAME["osd_op_num_shards"]) == "osd"
    assert layer_of(BY_NAME["mon_max_pg_per_osd"]) == "mgr"  # its services say so
    assert layer_of(BY_NAME["ms_async_op_threads"]) == "common"
    assert layer_of(BY_NAME["objecter_inflight_ops"]) == "client"
    assert cost_of(BY_NAME["bluestore_min_alloc_size"], "osd", None) is Cost.REFORMAT
    assert cost_of(BY_NAME["osd_op_num_shards"], "osd", None) is Cost.RESTART
    cap = BY_NAME["osd_client_message_cap"]
    assert cost_of(cap, "osd", None) is Cost.RESTART  # runtime-updatable, but not flagged
    assert cost_of(cap, "osd", {"osd_client_message_cap": True}) is Cost.RUNTIME
    assert cost_of(BY_NAME["osd_memory_target"], "osd", None) is Cost.RUNTIME  # flagged
    assert cost_of(BY_NAME["objecter_inflight_ops"], "client", None) is Cost.RUNTIME
    assert build(BY_NAME["osd_op_num_shards"], 5).to_dict()["hard_low"] == 0


def test_bundled_space_was_generated_from_ceph_16() -> None:
    space = load_space("ceph")
    assert "Ceph 16.2" in space.description and "probe of live daemons" in space.description
    assert 300 <= len(space) <= 600
    assert space.is_valid(space.default_config())
    layers = {p.layer for p in space.parameters}
    assert layers <= {"osd", "mon", "mgr", "common", "client", "pool"}
    for name in ("osd_op_num_shards", "bluestore_cache_size", "osd_client_message_cap"):
        assert name in space
    assert space["osd_client_message_cap"].cost is Cost.RUNTIME  # the probe saw it observed
    assert space["bluestore_cache_size"].cost is Cost.RESTART  # "not observed"


def test_expert_config_fits_the_space_and_renders_as_ceph_conf() -> None:
    space = load_space("ceph")
    config = load_config("expert", space)
    assert config["osd_op_num_shards"] == 8 and config["bluestore_csum_type"] == "none"
    assert config["osd_max_pg_log_entries"] == 10  # below the search range, within hard bounds
    short_logs = {"osd_min_pg_log_entries": 10, "osd_max_pg_log_entries": 10}
    assert space.is_valid(short_logs)  # extendable: valid up to the hard bounds
    assert not space.is_valid({"osd_max_pg_log_entries": -1})
    text = ceph_conf_section(config, space, "expert config")
    assert text.startswith("# expert config\n")
    assert "[osd]\n" in text and "osd_op_num_shards = 8\n" in text
    assert "[global]\nthrottler_perf_counter = false\n" in text
    assert "osd_client_message_cap" not in text  # only what differs from the defaults


def test_values_are_written_and_compared_as_ceph_shows_them() -> None:
    assert format_value(True) == "true" and format_value(4096.0) == "4096"
    assert format_value(0.3) == "0.3"
    assert same_value("0.300000", 0.3) and same_value("256Mi", 268435456)
    assert same_value("true", True) and not same_value("false", True)
    assert not same_value("5", 4)
    # Ceph prints doubles with 6 decimals: a tuner's 0.05281965762 shows as 0.052820
    assert same_value("0.052820", 0.05281965762139709) and not same_value("0.052820", 0.0528)


def test_target_spec_round_trips_without_a_cluster(tmp_path: Path) -> None:
    from stortune.targets import make_target
    from stortune.targets.ceph import CephTarget

    space = load_space("ceph")
    target = CephTarget(space, osds=3, osd_size="1g", state_dir=tmp_path)
    spec = target.describe()
    assert spec["kind"] == "ceph" and spec["mode"] == "local" and spec["osds"] == 3
    again = make_target(spec, space)
    assert isinstance(again, CephTarget) and again.describe() == spec
    assert again.settings_for({"osd_op_num_shards": 2}) == {"osd_op_num_shards": "2"}
    with pytest.raises(TargetError, match="unknown setting"):
        make_target({**spec, "replicas": 3}, space)
    with pytest.raises(TargetError, match="ceph.conf"):
        CephTarget(space, mode="existing")


def test_conf_command_prints_the_expert_config_as_ceph_conf() -> None:
    import typer
    from typer.testing import CliRunner

    from stortune.cli.ceph import register

    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a group of one command would hide its name
    result = CliRunner().invoke(app, ["ceph", "conf", "expert"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("# expert: A hand-tuned")
    assert "[osd]\n" in result.output and "bluestore_csum_type = none\n" in result.output
    for command in ("space", "up", "down", "status", "conf"):
        help_text = CliRunner().invoke(app, ["ceph", command, "--help"]).output
        assert "Example: stortune ceph " + command in help_text


def test_object_store_sizes_in_whole_device_blocks_are_searched_over_powers_of_two() -> None:
    def size_option(name: str) -> dict:
        return {"name": name, "type": "size", "min": "", "max": "", "services": ["osd"]}

    flush = build(size_option("bluefs_min_flush_size"), 524288)
    assert flush.kind is Kind.ORDINAL
    assert all(v % 4096 == 0 and v & (v - 1) == 0 for v in flush.values)
    assert min(flush.values) == 131072 and max(flush.values) == 2097152  # default / 4 .. x 4
    odd = build(size_option("bluefs_odd_size"), 5000)  # not whole blocks: a plain integer
    assert odd.kind is Kind.INT
    elsewhere = build(size_option("osd_map_share_size"), 8192)  # not the object store's
    assert elsewhere.kind is Kind.INT


def test_the_device_block_size_is_washed_out() -> None:
    assert "bdev_block_size" not in load_space("ceph")


def test_thresholds_of_a_full_osd_are_not_tuned() -> None:
    option = {**BY_NAME["mon_osd_full_ratio"], "name": "osd_failsafe_full_ratio", "flags": []}
    assert classify(option, Context(pinned=PINNED, names=set(BY_NAME))) == (
        "washed",
        "capacity threshold (when writes stop, not how fast they run)",
    )
    assert "osd_failsafe_full_ratio" not in load_space("ceph")


def test_allocation_sizes_never_go_below_the_device_block() -> None:
    alloc = load_space("ceph")["bluestore_min_alloc_size"]
    assert min(alloc.values) == 4096 and alloc.default == 4096


def test_options_mclock_profiles_set_themselves_are_not_tuned_under_them() -> None:
    space = load_space("ceph")
    wpq = space.validate({"osd_op_queue": "wpq"})
    assert "osd_max_backfills" in wpq and "osd_mclock_profile" not in wpq
    builtin = space.validate({"osd_op_queue": "mclock_scheduler"})
    assert builtin["osd_mclock_profile"] == "high_client_ops"
    assert "osd_max_backfills" not in builtin  # the profile sets it (a tuned value is overridden)
    assert "osd_mclock_scheduler_client_res" not in builtin
    custom = space.validate({"osd_op_queue": "mclock_scheduler", "osd_mclock_profile": "custom"})
    assert "osd_mclock_scheduler_client_res" in custom


def test_values_that_let_corruption_through_carry_a_risk() -> None:
    space = load_space("ceph")
    assert set(risky_values(space["bluestore_csum_type"])) == {"none"}
    assert set(risky_values(space["bluestore_ignore_data_csum"])) == {True}
    assert set(risky_values(space["ms_crc_data"])) == {False}
    safe = safe_space(space)
    assert "none" not in safe["bluestore_csum_type"].values
    expert = load_config("expert", space)  # Micron's: no checksums on data
    assert [r.parameter for r in risks_of(space, expert)] == ["bluestore_csum_type"]


def test_a_generated_space_marks_the_risky_values() -> None:
    options = [
        {"name": "bluestore_csum_type", "type": "str", "level": "advanced", "default": "crc32c",
         "enum_values": ["none", "crc32c", "xxhash64"], "flags": [], "services": ["osd"],
         "desc": "Default checksum algorithm to use"},
    ]  # fmt: skip
    space, _ = generate_space(options)
    assert set(risky_values(space["bluestore_csum_type"])) == {"none"}


def test_the_data_cache_keeps_a_share_under_the_autotuner_too() -> None:
    """The autotuner divides the cache by the kv, meta and kv onode ratios, data taking the
    rest: a negative rest aborted ceph-osd here (PriorityCache mem_avail >= 0), with kv and
    meta at their defaults (0.45 each), a kv onode ratio of 0.142 and autotune on."""
    space = load_space("ceph")
    aborted_here = {
        "bluestore_cache_autotune": True,
        "bluestore_cache_kv_onode_ratio": 0.142,
        "osd_memory_target": 1999759004,
        "osd_memory_base": 1236084077,
        "osd_memory_cache_min": 142787260,
        "osd_memory_expected_fragmentation": 0.1535,
    }
    with pytest.raises(ConfigError, match="kv_onode_ratio"):
        space.validate(aborted_here)
    shared = space.validate({**aborted_here, "bluestore_cache_kv_ratio": 0.4})
    assert shared["bluestore_cache_meta_ratio"] == 0.45  # read under the autotuner: in the config
    space.validate({**aborted_here, "bluestore_cache_autotune": False})  # fixed sizes: no abort


def test_the_cache_autotuner_keeps_room_for_base_and_minimum_cache() -> None:
    space = load_space("ceph")
    aborted_here = {  # made ceph-osd abort with PriorityCache mem_avail < 0 on this machine
        "bluestore_cache_autotune": True,
        "osd_memory_target": 3015703721,
        "osd_memory_base": 1941604776,
        "osd_memory_cache_min": 304658966,
        "osd_memory_expected_fragmentation": 0.733,
    }
    with pytest.raises(ConfigError, match="osd_memory_expected_fragmentation"):
        space.validate(aborted_here)
    space.validate({**aborted_here, "osd_memory_expected_fragmentation": 0.15})
