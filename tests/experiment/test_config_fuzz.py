"""Hostile config files: random bytes, random YAML, and the default config with any field set
to any value. Each is either a valid ExperimentConfig (that survives the dump/load round trip
a run directory relies on) or a ConfigError with a message; never another exception."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from cosmosfl.experiment.config import (
    ConfigError,
    ExperimentConfig,
    config_from_dict,
    dump_config,
    flatten,
    load_config,
    parse_override,
)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(),
    st.just(10**400),
    st.floats(),
    st.text(max_size=6),
    st.sampled_from(["cosmos", "fedavg", "mlp", "cnn", "iid", "paper", "cpu", "digits", "a.npz"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(st.text(max_size=5), st.integers(0, 2), st.none()), inner, max_size=3
        ),
    ),
    max_leaves=6,
)
DEFAULT = flatten(ExperimentConfig().to_dict())
PATHS = st.one_of(
    st.sampled_from(sorted(DEFAULT)).map(lambda k: k.split(".")),
    st.sampled_from(["algorithm.lam", "algorithm.name", "algorithm.b0", "algorithm.x"]).map(
        lambda k: k.split(".")
    ),
    st.lists(
        st.sampled_from(["data", "clients", "faults", "algorithm", "rounds", "x"]),
        min_size=1,
        max_size=2,
    ),
)


def _outcome(load: Any) -> ExperimentConfig | ConfigError:
    try:
        cfg = load()
    except ConfigError as err:
        assert str(err)
        return err
    assert isinstance(cfg, ExperimentConfig)
    # What a run directory stores must load back to the same config (resume relies on it).
    again = config_from_dict(yaml.safe_load(dump_config(cfg)))
    assert again.to_dict() == cfg.to_dict()
    return cfg


def _set(raw: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    node = raw
    for part in path[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[path[-1]] = value
    return raw


@given(edits=st.lists(st.tuples(PATHS, VALUES), min_size=1, max_size=3))
@example(edits=[(["data", "alpha"], math.nan)])
@example(edits=[(["clients", "lr"], math.inf)])
@example(edits=[(["data", "alpha"], 10**400)])
@example(edits=[(["algorithm", "lam"], 10**400)])
@example(edits=[([1], 2), (["x"], 1)])
@example(edits=[(["algorithm", None], 1)])
def test_any_field_set_to_any_value_is_valid_or_a_config_error(edits: list) -> None:  # type: ignore[type-arg]
    raw = ExperimentConfig().to_dict()
    for path, value in edits:
        raw = _set(raw, path, value)
    _outcome(lambda: config_from_dict(raw))


@given(raw=VALUES)
def test_any_yaml_document_is_valid_or_a_config_error(raw: Any, tmp_path_factory: Any) -> None:
    path = Path(tmp_path_factory.mktemp("cfg")) / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    _outcome(lambda: load_config(path))


@given(data=st.binary(max_size=64))
@example(data=b"\xff\xfe\x00rounds: 1")  # not UTF-8
@example(data=b"rounds: !!python/object:os.system ['true']")  # a tag safe_load refuses
@example(data=b"{[1]: 2}")  # an unhashable key
def test_any_bytes_are_a_config_or_a_config_error(data: bytes, tmp_path_factory: Any) -> None:
    path = Path(tmp_path_factory.mktemp("cfg")) / "config.yaml"
    path.write_bytes(data)
    _outcome(lambda: load_config(path))


@given(text=st.text(max_size=20))
@example(text="rounds=[")
@example(text="rounds=\x00")
def test_any_override_is_applied_or_a_config_error(text: str) -> None:
    def load() -> ExperimentConfig:
        parse_override(text)
        return load_config(None, [text])

    _outcome(load)


# Regressions found by the suites above, each with the message a user now reads (before: the
# exception named in each case, with a traceback).
def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"\xff\xfe\x00rounds: 1")  # UnicodeDecodeError
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_config(path)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({1: 2, "rounds": 3}, "keys in the config must be names, got 1"),  # TypeError in join
        ({"data": {None: 1}}, "keys in data must be names, got None"),
        ({"algorithm": {"name": "cosmos", None: 1}}, "keys in algorithm must be"),  # TypeError
        ({"data": {"alpha": 10**400}}, r"data.alpha = 1\d+ is too large"),  # OverflowError
        ({"algorithm": {"lam": 10**400}}, "algorithm.lam = .* is too large"),  # OverflowError
        ({"data": {"alpha": math.nan}}, "data.alpha = nan must be a finite number"),  # accepted
        ({"clients": {"lr": math.inf}}, "clients.lr = inf must be a finite number"),  # accepted
        ({"clients": {"models": {"mlp": math.inf}}}, "positive fractions"),  # accepted
    ],
)
def test_odd_keys_and_non_finite_numbers_are_config_errors(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(raw)


def test_an_override_whose_value_is_not_yaml_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"override 'rounds=\[': the value is not valid YAML"):
        load_config(None, ["rounds=["])  # yaml.parser.ParserError
