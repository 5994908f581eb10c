"""The ClientApp's node-side client: a node builds only its own partition (issue 14)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.apps.flower import client_app
from cosmosfl.data import prepare
from cosmosfl.experiment import client_builder
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import load_config

from ...engines.flower.test_flower_engine import SMALL, settings_for


def test_a_node_prepares_only_its_own_partition_and_U(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(None, [*SMALL, "seed=7", "data.validation_fraction=0.2"])
    full = build_experiment(cfg)
    prepared: list[int] = []
    built: list[int] = []
    real_prepare, real_client = prepare.prepare_images, client_builder.Client

    def spy_prepare(x, mean, std):  # type: ignore[no-untyped-def]
        prepared.append(len(x))
        return real_prepare(x, mean, std)

    def spy_client(cid, *args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(cid)
        return real_client(cid, *args, **kwargs)

    # The standardiser (data/prepare.py) and the one client builder (client_builder.py) are
    # where every node's images are prepared and its client made.
    monkeypatch.setattr(prepare, "prepare_images", spy_prepare)
    monkeypatch.setattr(client_builder, "Client", spy_client)
    monkeypatch.setattr(client_app, "_CLIENTS", {})
    client, _ = client_app.load_client(settings_for(cfg), 2, str(tmp_path))

    assert built == [2]  # no other client object, learner or split is made
    mine = full.clients[2]
    own_rows = len(full.public_x) + len(mine.train[0]) + len(mine.test[0])
    own_rows += len(mine.validation[0])
    assert sum(prepared) == own_rows  # no other client's images are ever standardised
    assert list(client_app._CLIENTS) == [(None, settings_for(cfg).config_text, 2)]
    # ... and what it builds is exactly that client of the full build.
    assert client.id == 2
    for mine_part, full_part in zip(
        (client.train, client.test, client.validation),
        (mine.train, mine.test, mine.validation),
        strict=True,
    ):
        np.testing.assert_array_equal(mine_part[0], full_part[0])
        np.testing.assert_array_equal(mine_part[1], full_part[1])
    np.testing.assert_array_equal(client.public_x, full.public_x)


def test_a_partition_id_outside_the_config_is_a_clear_error(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(None, SMALL)
    monkeypatch.setattr(client_app, "_CLIENTS", {})
    with pytest.raises(ValueError, match=r"partition-id 4 is not a client of this config"):
        client_app.load_client(settings_for(cfg), 4, str(tmp_path))
    with pytest.raises(ValueError, match=r"client ids \[-1\] are not clients of this config"):
        build_experiment(cfg, clients=[-1])


def test_the_client_app_imports_no_reporting_plotting_or_cli_modules() -> None:
    # Deployment starts a ClientApp process per message: what it imports is paid every time.
    import json
    import subprocess
    import sys

    code = (
        "import sys, json, cosmosfl.apps.flower.client_app as app;"
        "import cosmosfl.experiment.build;"  # what load_client imports on a message
        "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        ).stdout
    )
    unwanted = [
        m
        for m in loaded
        if m.split(".")[0] in {"matplotlib", "mlflow", "tensorboard"}
        or m in {"cosmosfl.cli", "cosmosfl.bench", "scipy.cluster"}  # clustering: server only
        or m.startswith(("cosmosfl.cli.", "cosmosfl.bench.",
                         "cosmosfl.reporting", "cosmosfl.experiment.compare",
                         "cosmosfl.experiment.sweep", "cosmosfl.experiment.runner",
                         "cosmosfl.experiment.tracking", "cosmosfl.experiment.checkpoint"))
    ]  # fmt: skip
    assert unwanted == []
