"""`cosmosfl audit` end to end on the digits default (tiny here; the documented size is slow)."""

import json

import pytest

pytest.importorskip("opacus")
pytest.importorskip("dp_accounting")

from cosmosfl.cli.main import main

TINY = [
    "-c",
    "configs/default.yaml",
    "rounds=2",
    "algorithm.pretrain_epochs=2",
    "algorithm.local_epochs=1",
    "algorithm.server_epochs=1",
    "algorithm.distill_epochs=1",
]


def audit(tmp_path, monkeypatch, repo_root, *args):
    monkeypatch.chdir(repo_root)
    out = tmp_path / "audit"
    assert main(["audit", *args, "--out", str(out)]) == 0
    return json.loads((out / "audit.json").read_text()), (out / "audit.md").read_text()


def test_audit_runs_on_the_digits_default(tmp_path, monkeypatch, repo_root, capsys):
    result, table = audit(tmp_path, monkeypatch, repo_root, *TINY, "--canaries", "8")
    channels = result["channels"]
    assert {"soft labels, round 1", "soft labels, round 2", "deployed model"} <= set(channels)
    for stats in channels.values():
        assert stats["members"] == 8 and stats["nonmembers"] == 8  # each canary in once, out once
        assert 0.0 <= stats["auc"] <= 1.0 and stats["epsilon_lower_bound"] >= 0.0
    assert result["accountant_epsilon"] is None and "no differential privacy" in table
    assert "| deployed model |" in capsys.readouterr().out


def test_audit_under_a_budget_reports_the_accountants_epsilon(tmp_path, monkeypatch, repo_root):
    result, _ = audit(
        tmp_path, monkeypatch, repo_root, *TINY, "--canaries", "6", "privacy.epsilon=2"
    )
    assert 0 < result["accountant_epsilon"] <= 2.0 + 1e-9
    assert result["lower_bound_within_accountant"] is True
    assert result["delta"] == 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("budget", [[], ["privacy.epsilon=4"]])
def test_audit_at_the_documented_size(tmp_path, monkeypatch, repo_root, budget):
    # The size docs/privacy.md gives: configs/default.yaml, 40 canaries, seeds 1,2,3 (6 runs).
    result, _ = audit(
        tmp_path,
        monkeypatch,
        repo_root,
        "-c",
        "configs/default.yaml",
        "--canaries",
        "40",
        "--seeds",
        "1,2,3",
        *budget,
    )
    for stats in result["channels"].values():
        assert stats["members"] == 120 and stats["nonmembers"] == 120
    if budget:
        assert result["lower_bound_within_accountant"] is True


def test_audit_of_a_client_not_in_the_config_is_a_user_error(monkeypatch, repo_root, capsys):
    monkeypatch.chdir(repo_root)
    assert main(["audit", *TINY, "--client", "99", "--canaries", "4"]) == 2
    err = capsys.readouterr().err
    assert "client 99 is not a client of this config" in err and "Traceback" not in err
