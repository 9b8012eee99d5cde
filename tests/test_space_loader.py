import textwrap
from pathlib import Path

import pytest

from stortune.errors import SpaceError
from stortune.space import bundled_spaces, load_space, parse_space


def fails_with(text: str, *parts: str) -> str:
    with pytest.raises(SpaceError) as info:
        parse_space(textwrap.dedent(text), "s.yaml")
    message = str(info.value)
    for part in parts:
        assert part in message, message
    assert "\n" not in message
    return message


def test_malformed_yaml_names_file_and_line() -> None:
    fails_with(
        """\
        name: s
        parameters:
          a: {type: int, low: 1, high: 3, default: 2
          b: {type: bool, default: true}
        """,
        "s.yaml:4",
        "malformed YAML",
    )


def test_unknown_field_names_line_and_parameter() -> None:
    fails_with(
        """\
        name: s
        parameters:
          a:
            type: int
            low: 1
            high: 8
            dfault: 2
        """,
        "s.yaml:7",
        "parameter 'a'",
        "unknown field 'dfault'",
    )


def test_default_out_of_range_names_line_and_parameter() -> None:
    fails_with(
        """\
        name: s
        parameters:
          a: {type: int, low: 1, high: 8, default: 2}
          b:
            type: int
            low: 1
            high: 8
            default: 99
        """,
        "s.yaml:8",
        "parameter 'b'",
        "default 99",
        "out of range [1, 8]",
    )


def test_bad_type_is_named() -> None:
    fails_with(
        "name: s\nparameters:\n  a: {type: integer, low: 1, high: 2, default: 1}\n",
        "s.yaml:3",
        "parameter 'a'",
        "type must be one of int, float",
    )


def test_duplicate_key_is_an_error() -> None:
    fails_with(
        "name: s\nparameters:\n  a: {type: bool, default: true}\n"
        "  a: {type: bool, default: false}\n",
        "line 4",
        "'a' is given twice",
    )


def test_constraint_with_unknown_parameter_names_line() -> None:
    fails_with(
        """\
        name: s
        parameters:
          a: {type: int, low: 1, high: 8, default: 2}
        constraints:
          - require: a <= b
        """,
        "s.yaml:5",
        "unknown parameter(s): b",
    )


def test_unsafe_constraint_is_refused() -> None:
    fails_with(
        """\
        name: s
        parameters:
          a: {type: int, low: 1, high: 8, default: 2}
        constraints:
          - forbid: __import__('os').system('touch /tmp/pwned')
        """,
        "s.yaml:5",
        "constraint",
    )
    assert not Path("/tmp/pwned").exists()


def test_invalid_default_config_is_an_error() -> None:
    fails_with(
        """\
        name: s
        parameters:
          a: {type: int, low: 1, high: 8, default: 6}
          b: {type: int, low: 1, high: 8, default: 4}
        constraints:
          - require: a <= b
        """,
        "default config is invalid",
        "a <= b",
    )


def test_condition_cycle_is_an_error() -> None:
    fails_with(
        """\
        name: s
        parameters:
          a: {type: bool, default: true, active_when: "b"}
          b: {type: bool, default: true, active_when: "a"}
        """,
        "cycle",
    )


def test_condition_mapping_form_and_order() -> None:
    space = parse_space(
        textwrap.dedent(
            """\
            name: s
            parameters:
              journal: {type: categorical, values: [a, b], default: a, active_when: {fs: [ext4]}}
              fs: {type: categorical, values: [ext4, xfs], default: ext4}
            """
        )
    )
    assert space.names == ["fs", "journal"]  # reordered so the condition reads back
    assert "journal" not in space.validate({"fs": "xfs"})


def test_round_trip_through_yaml(toy_space) -> None:
    import yaml

    again = parse_space(yaml.safe_dump(toy_space.to_dict(), sort_keys=False))
    assert again.to_dict() == toy_space.to_dict()
    assert again.default_config() == toy_space.default_config()


def test_missing_file_and_unknown_bundled_name() -> None:
    with pytest.raises(SpaceError, match="no such file"):
        load_space("nothere/space.yaml")
    with pytest.raises(SpaceError, match="no space file or bundled space 'nosuchspace'"):
        load_space("nosuchspace")


def test_bundled_spaces_load() -> None:
    for name in bundled_spaces():
        space = load_space(name)
        assert space.is_valid(space.default_config())
