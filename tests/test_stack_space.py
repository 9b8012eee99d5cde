"""The whole-stack space: every value applies on this kernel (the clean washes what does not),
risky values stay out of the search unless allowed, and the block layer's scheduler tunables
come and go with their scheduler and are put back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stortune.errors import SpaceError
from stortune.space import load_space, parse_space
from stortune.space.risk import has_risks, risks_of, safe_space
from stortune.tuners import make_tuner

root = pytest.mark.skipif(os.geteuid() != 0, reason="mkfs, mount and sysfs need root")


def test_the_stack_space_has_every_layer_and_its_risks() -> None:
    stack = load_space("stack")
    layers = {p.layer for p in stack.parameters}
    assert len(stack) >= 30 and layers == {"mkfs", "mount", "block", "vm"}
    risky = {p.name for p in stack.parameters if p.extra.get("risk")}
    assert {"ext4_barrier", "ext4_journal_async_commit", "ext4_data", "btrfs_barrier"} <= risky
    assert risks_of(stack, stack.default_config()) == []  # the default is safe
    config = stack.validate({"ext4_barrier": False, "ext4_commit": 60})
    assert [r.parameter for r in risks_of(stack, config)] == ["ext4_commit", "ext4_barrier"]
    assert all(r.why and "\n" not in r.why for r in risks_of(stack, config))


def test_risk_needs_a_safe_default_and_values_of_the_parameter() -> None:
    base = "name: s\nparameters:\n  b: {type: bool, default: true, risk: {%s}}\n"
    assert has_risks(parse_space(base % "false: loses data"))
    for bad, message in (
        ("true: loses data", "the default True must be safe"),
        ("maybe: loses data", "not a value"),
        ("false: ''", "say in one line"),
    ):
        with pytest.raises(SpaceError, match=message):
            parse_space(base % bad)


def test_a_risky_value_is_never_proposed_unless_allowed() -> None:
    stack = load_space("stack")
    safe = safe_space(stack)
    proposals = 0
    for name, asks in (("random", 500), ("lhs", 300), ("bestconfig", 200)):
        tuner = make_tuner(name, safe, "max", seed=3, budget=asks)
        for i in range(asks):
            config = tuner.ask()
            assert risks_of(stack, config) == [], (name, config)
            tuner.tell(config, float(i % 7))
            proposals += 1
    assert proposals == 1000
    allowed = make_tuner("random", stack, "max", seed=3, budget=300)
    assert any(risks_of(stack, allowed.ask()) for _ in range(300))  # they exist to be found


@root
def test_every_value_of_the_stack_space_applies_here(tmp_path: Path) -> None:
    from stortune.targets.localfs import LocalFsTarget
    from stortune.workflows.clean import clean_space, cleaned_space

    stack = load_space("stack")
    result = clean_space(stack, LocalFsTarget(stack, image_size="2g"))
    washed = {(w["parameter"], repr(w["value"])) for w in stack.washed}
    refused = {(w["parameter"], repr(w["value"])) for w in [*result.washed, *result.unreachable]}
    assert refused <= washed, [
        w for w in result.washed if (w["parameter"], repr(w["value"])) not in washed
    ]
    assert result.values == sum(len(p.values) for p in stack.parameters)
    cleaned = cleaned_space(stack, result)
    assert cleaned["parameters"].keys() == {p.name for p in stack.parameters}


@root
def test_scheduler_tunables_follow_their_scheduler_and_the_queue_is_put_back(
    tmp_path: Path,
) -> None:
    from stortune.system.sysconf import read
    from stortune.targets.localfs import LocalFsTarget

    stack = load_space("stack")
    target = LocalFsTarget(stack, image_size="1g")
    with target:
        target.setup()
        queue = Path(f"/sys/block/{Path(target._dev).name}/queue")  # noqa: SLF001
        # as found: a loop device keeps its queue settings from one attachment to the next
        before = {k: read(queue / k) for k in ("scheduler", "nr_requests")}
        target.apply({"scheduler": "mq-deadline", "deadline_fifo_batch": 64, "nr_requests": 64})
        assert (
            read(queue / "iosched" / "fifo_batch") == "64" and read(queue / "nr_requests") == "64"
        )
        target.apply({"scheduler": "bfq", "bfq_slice_idle": 0, "nr_requests": 256})
        assert read(queue / "scheduler") == "bfq" and read(queue / "iosched" / "slice_idle") == "0"
        target.apply({"scheduler": "kyber", "kyber_read_lat_nsec": 500000})
        plan = target.plan({"fs": "ext4", "ext4_data": "journal"})
        assert "delalloc" not in plan.mount and "data=journal" in plan.mount  # omitted default
    assert {k: read(queue / k) for k in before} == before
    assert not list(Path(target.state_dir).glob("journal-*.jsonl"))


def test_a_parameter_left_with_one_safe_value_is_not_ranked_for_tuning() -> None:
    from stortune.space.risk import safe_space
    from stortune.tuners.topk import rankable

    safe = safe_space(load_space("stack"))
    names = ["fs", "btrfs_barrier", "ext4_data", "metric_not_in_space"]
    # btrfs's barrier has only `true` once its risky value is out: it would rank as btrfs
    assert rankable(safe, names) == ["fs", "ext4_data", "metric_not_in_space"]
    assert "btrfs_barrier" in rankable(load_space("stack"), names)  # with risk: two values


def test_a_ranked_child_frees_its_parent_and_a_pinned_space_can_start_elsewhere() -> None:
    from stortune.tuners.topk import pin, with_parents

    safe = safe_space(load_space("stack"))
    free = with_parents(safe, ["bfq_slice_idle", "read_ahead_kb", "bfq_low_latency"])
    assert free == ["scheduler", "bfq_slice_idle", "read_ahead_kb", "bfq_low_latency"]
    start = {**safe.default_config(), "fs": "xfs", "scheduler": "bfq", "bfq_slice_idle": 0}
    start = safe.validate(start)
    focused = pin(safe, free, held=start, start=start)
    assert focused.default_config() == start  # the first evaluation is the start config
    assert focused["fs"].values == ("xfs",) and len(focused["scheduler"].values) > 1
