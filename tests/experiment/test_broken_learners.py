"""Broken client models are caught, not averaged in: a model whose probabilities are NaN or
whose columns are reversed is degenerate (flagged in summary.json and the report; `--strict`
stops the run), and a model that raises is one line naming the client, the model and the fix."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from cosmosfl.cli.main import main
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.health import DegenerateModelError
from cosmosfl.experiment.runner import run_experiment
from cosmosfl.reporting.report import write_report

BROKEN = textwrap.dedent(
    """
    import numpy as np
    from sklearn.linear_model import LogisticRegression


    class NaNProba(LogisticRegression):
        def predict_proba(self, x):
            return np.full((len(x), len(self.classes_)), np.nan)


    class Reversed(LogisticRegression):
        def predict_proba(self, x):
            return super().predict_proba(x)[:, ::-1]


    class FitRaises(LogisticRegression):
        def fit(self, x, y, sample_weight=None):
            raise ValueError("boom in fit")


    def factory_raises(num_classes):
        raise RuntimeError("the factory is broken")
    """
)
TINY = [
    "rounds=1",
    "threads=1",
    "data.num_clients=5",
    "algorithm.name=local",
    "algorithm.pretrain_epochs=1",
    "algorithm.local_epochs=1",
]


@pytest.fixture
def broken(tmp_path, monkeypatch):
    (tmp_path / "broken_models.py").write_text(BROKEN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def models(name: str) -> str:
    return f"clients.models={{broken_models.{name}: 1.0}}"


@pytest.mark.parametrize("name", ["NaNProba", "Reversed"])
def test_a_degenerate_model_is_flagged_in_summary_and_report(name, broken, tmp_path):
    cfg = load_config(None, [*TINY, models(name)])
    out = tmp_path / "cmp" / "local" / "seed1"
    with pytest.warns(UserWarning, match="there is no previous model"):
        result = run_experiment(cfg, out, progress=False)
    flagged = json.loads((out / "summary.json").read_text())["degenerate_clients"]
    if name == "NaNProba":  # every refit is rejected: every client predicts uniformly
        assert set(flagged) == {str(c) for c in range(5)}
    # Reversed: a client whose reversed columns happen to hit its majority class ties with
    # the baseline and is not flagged; the others are
    assert flagged and all(f["model"] == f"broken_models.{name}" for f in flagged.values())
    assert "same probabilities for every row" in next(iter(flagged.values()))["reason"]
    assert result.summary["degenerate_clients"] == flagged
    report = write_report(tmp_path / "cmp")
    assert any("degenerate client model" in n for n in report.notes)
    assert "**flagged**" in (tmp_path / "cmp" / "table.md").read_text()


def test_the_rejected_refit_warning_does_not_advise_a_learning_rate_for_nan(broken, tmp_path):
    cfg = load_config(None, [*TINY, models("NaNProba")])
    with pytest.warns(UserWarning) as caught:
        run_experiment(cfg, tmp_path / "r", progress=False)
    text = " ".join(str(w.message) for w in caught if "refit diverged" in str(w.message))
    assert "returns NaN or inf: fix the estimator" in text
    assert "the previous model stays" not in text and "learning rate" not in text


def test_strict_stops_a_run_with_a_degenerate_model(broken, tmp_path, capsys):
    cfg = load_config(None, [*TINY, models("Reversed")])
    with pytest.raises(DegenerateModelError, match=r"round 1: client 0's model .* degenerate"):
        run_experiment(cfg, tmp_path / "a", progress=False, strict=True)
    code = main(["run", "--out", str(tmp_path / "b"), "-q", "--strict", *TINY, models("NaNProba")])
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert code == 2 and len(err) == 1 and "degenerate" in err[0] and "--strict" in err[0]


def test_a_fit_that_raises_is_one_line_naming_client_and_model(broken, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--out", str(out), "-q", *TINY, models("FitRaises")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "client 0 (model 'broken_models.FitRaises')" in err and "boom in fit" in err
    assert "check_learner" in err and "Traceback" not in err
    assert "boom in fit" in (out / "client-error.txt").read_text()


def test_a_model_factory_that_raises_is_one_line(broken, tmp_path, capsys):
    code = main(["run", "--out", str(tmp_path / "r"), "-q", *TINY, models("factory_raises")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "client 0: building model 'broken_models.factory_raises' raised RuntimeError" in err
    assert "the factory is broken" in err


def test_a_one_class_image_folder_is_one_line(tmp_path, capsys):
    from PIL import Image

    folder = tmp_path / "images" / "cats"
    folder.mkdir(parents=True)
    for i in range(4):
        Image.fromarray(np.full((8, 8, 3), i * 40, np.uint8)).save(folder / f"{i}.png")
    code = main(["run", "--out", str(tmp_path / "r"), "-q", f"data.dataset={tmp_path / 'images'}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "one class folder ('cats')" in err and "at least 2 classes" in err
