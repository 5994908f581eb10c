"""`cosmosfl flower` user errors: one line, exit 2, no traceback (flwr installed or not)."""

from __future__ import annotations

import pytest

from cosmosfl.cli.main import main


def test_missing_flower_extra_is_a_one_line_error(monkeypatch, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import cosmosfl.engines.flower as flower

    monkeypatch.setattr(flower, "flower_available", lambda: False)
    assert main(["flower", "app", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'cosmosfl[flower]'" in err and "Traceback" not in err
    assert not (tmp_path / "pyproject.toml").exists()


def test_bad_timeout_and_config_values_name_the_field(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("flwr")
    assert main(["flower", "app", "--dir", str(tmp_path), "--reply-timeout", "0"]) == 2
    assert "--reply-timeout must be > 0" in capsys.readouterr().err
    assert main(["flower", "app", "--dir", str(tmp_path), "rounds=0"]) == 2
    assert "rounds = 0 is not allowed" in capsys.readouterr().err
