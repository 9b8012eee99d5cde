import numpy as np
import pytest

from stortune.errors import ConfigError
from stortune.space import Space


def test_default_config_fills_every_active_parameter(toy_space: Space) -> None:
    assert toy_space.default_config() == {
        "block_size": 4096,
        "inode_size": 256,
        "journal": "ordered",
        "barrier": True,
        "commit": 5,
        "ratio_a": 0.3,
        "ratio_b": 0.3,
    }


def test_values_are_coerced_from_text(toy_space: Space) -> None:
    config = toy_space.validate(
        {"block_size": "2048", "commit": "10", "barrier": "no", "ratio_a": "0.25"}
    )
    assert config["block_size"] == 2048
    assert config["commit"] == 10
    assert config["barrier"] is False
    assert config["ratio_a"] == 0.25


def test_inactive_parameter_is_dropped(toy_space: Space) -> None:
    config = toy_space.validate({"journal": "writeback", "barrier": False})
    assert "barrier" not in config
    assert toy_space.validate({"journal": "journal"})["barrier"] is True


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"blocksize": 4096}, "unknown parameter 'blocksize'"),
        ({"block_size": 3000}, "parameter 'block_size': 3000 is not one of {1024, 2048, 4096}"),
        ({"commit": 0}, "parameter 'commit': 0 is out of range [1, 300] log"),
        ({"commit": 2.5}, "parameter 'commit': 2.5 is not a whole number"),
        ({"ratio_a": "lots"}, "parameter 'ratio_a': 'lots' is not a number"),
        ({"ratio_a": float("nan")}, "parameter 'ratio_a': nan is not a finite number"),
        ({"barrier": "maybe"}, "parameter 'barrier': 'maybe' is not a boolean"),
        ({"journal": "nope"}, "parameter 'journal': 'nope' is not one of"),
    ],
)
def test_invalid_values_name_the_problem(toy_space: Space, config: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        toy_space.validate(config)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"block_size": 1024, "inode_size": 2048},
            "violates constraint require inode_size <= block_size (inode must fit in a block)",
        ),
        ({"ratio_a": 0.7, "ratio_b": 0.4}, "violates constraint require ratio_a + ratio_b <= 1"),
    ],
)
def test_violated_constraint_is_named(toy_space: Space, config: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        toy_space.validate(config)
    assert message in str(info.value)
    assert not toy_space.is_valid(config)


def test_valid_edge_of_constraint(toy_space: Space) -> None:
    assert toy_space.is_valid({"block_size": 1024, "inode_size": 1024})
    assert toy_space.is_valid({"ratio_a": 0.5, "ratio_b": 0.5})


def test_unit_cube_round_trip(toy_space: Space) -> None:
    rng = np.random.default_rng(1)
    for _ in range(500):
        config = toy_space.decode(rng.random(len(toy_space)))
        point = toy_space.encode(config)
        assert np.all((point >= 0) & (point <= 1))
        again = toy_space.decode(point)
        for name, value in config.items():
            assert again[name] == pytest.approx(value), name


def test_encoding_many_configs_at_once_equals_encoding_each(toy_space: Space) -> None:
    rng = np.random.default_rng(2)
    configs = [toy_space.decode(rng.random(len(toy_space))) for _ in range(300)]
    configs.append({})  # every parameter at its default
    expected = np.array([toy_space.encode(c) for c in configs])
    assert np.array_equal(toy_space.encode_many(configs), expected)
    assert toy_space.encode_many([]).shape == (0, len(toy_space))


def test_every_discrete_value_round_trips(toy_space: Space) -> None:
    for p in toy_space.parameters:
        values = p.values if p.values else range(int(p.low), int(p.high) + 1)
        if p.kind.value == "float":
            continue
        for value in values:
            assert p.from_unit(p.to_unit(value)) == value, (p.name, value)


def test_decode_applies_conditions(toy_space: Space) -> None:
    journal = toy_space["journal"]
    point = np.full(len(toy_space), 0.5)
    point[toy_space.names.index("journal")] = journal.to_unit("writeback")
    assert "barrier" not in toy_space.decode(point)


def test_one_hot_groups_map_back_to_parameters(toy_space: Space) -> None:
    configs = [toy_space.default_config(), toy_space.validate({"journal": "writeback"})]
    matrix, groups = toy_space.one_hot(configs)
    assert groups["journal"] == ["journal=ordered", "journal=writeback", "journal=journal"]
    assert matrix["journal=writeback"].tolist() == [0.0, 1.0]
    assert matrix["barrier"].tolist() == [1.0, 1.0]  # inactive takes its default
    assert matrix["block_size"].tolist() == [4096.0, 4096.0]
    assert sorted(c for cols in groups.values() for c in cols) == sorted(matrix.columns)


def test_full_factorial_counts_by_hand(toy_space: Space) -> None:
    # Discrete part: block x inode pairs with inode <= block: 1024 -> 4, 2048 -> 5, 4096 -> 5 = 14.
    # journal: ordered and journal have barrier (2 values), writeback none: 2*2 + 1 = 5.
    # commit at 2 levels: {1, 300}; ratio_a, ratio_b at 2 levels {0, 1}: 3 of 4 pairs sum <= 1.
    assert toy_space.grid_size(levels=2) == 14 * 5 * 2 * 3
    configs = list(toy_space.grid(levels=2))
    assert all(toy_space.is_valid(c) for c in configs)
    assert len({tuple(sorted(c.items())) for c in configs}) == len(configs)
    assert toy_space.raw_grid_size(levels=2) == 3 * 5 * 3 * 2 * 2 * 2 * 2


def test_subspace_holds_the_other_parameters(toy_space: Space) -> None:
    sub = toy_space.subspace(["inode_size", "commit"], fixed={"block_size": 1024})
    assert sub.names == ["inode_size", "commit"]
    assert sub.is_valid({"inode_size": 1024})
    assert not sub.is_valid({"inode_size": 2048})  # held block_size 1024 still constrains
    assert sub.full_config({"commit": 9})["block_size"] == 1024


def test_a_log_scaled_float_pinned_to_one_value_decodes_to_that_value() -> None:
    """Found by tuning Ceph: a pinned log-scaled range [86400, 86400] decoded to
    86399.99999999993 (exp(log(x)) != x), which the range check then refused."""
    import dataclasses

    from stortune.space import Kind, Parameter

    p = Parameter("interval", Kind.FLOAT, low=21600.0, high=345600.0, log=True, default=86400.0)
    pinned = dataclasses.replace(p, low=86400.0, high=86400.0)
    for u in (0.0, 0.3, 1.0):
        assert pinned.check(pinned.from_unit(u)) == 86400.0


def test_decoding_many_points_at_once_equals_decoding_each() -> None:
    """Designs and candidate sets decode a parameter's column at a time; every value (and its
    type: an int stays an int) must be what the one-point decode gives, conditions applied, on
    the shipped spaces' every kind (log-scaled ints and floats, huge int ranges, ordinals)."""
    from stortune.space.loader import load_space

    rng = np.random.default_rng(7)
    for name in ("ceph", "stack", "toy"):
        space = load_space(name)
        points = rng.random((400, len(space)))
        points[:20], points[20:40] = 0.0, 1.0  # the ends of every range
        points[40:60] = rng.integers(0, 32, (20, len(space))) / 32  # level boundaries
        points[60:80] = rng.uniform(-0.5, 1.5, (20, len(space)))  # clipped
        many = space.decode_many(points)
        each = [space.decode(p) for p in points]
        assert many == each, name
        assert [[type(v) for v in c.values()] for c in many] == [
            [type(v) for v in c.values()] for c in each
        ]


def test_decoding_many_refuses_points_of_the_wrong_width(toy_space: Space) -> None:
    with pytest.raises(ConfigError, match="dimensions"):
        toy_space.decode_many(np.zeros((3, len(toy_space) + 1)))
    assert toy_space.decode_many(np.zeros((0, len(toy_space)))) == []
