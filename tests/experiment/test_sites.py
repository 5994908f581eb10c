"""Sites that bring their own data and models, in-process (experiment/sites.py): site files,
U checked by its hash, the run's label set, config checks, and a run of the example."""

from __future__ import annotations

import numpy as np
import pytest

from cosmosfl.data.public import PublicSetError, file_sha256, load_public
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.experiment.runner import run_experiment
from cosmosfl.experiment.sites import (
    SiteRefusedError,
    read_site_file,
    shared_config,
    site_dataset,
    site_from_node_config,
)

SMALL = ["rounds=2", "threads=1", "algorithm.pretrain_epochs=2", "algorithm.local_epochs=1"]
NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def test_site_file_paths_are_relative_to_it(sites_root) -> None:  # type: ignore[no-untyped-def]
    site = read_site_file(sites_root / "clinic-c" / "site.yaml")
    assert site.data == sites_root / "clinic-c" / "records.csv"
    assert site.public is not None and site.public.resolve() == sites_root / "public.csv"
    assert site.model.name == "random_forest" and site.label_map["3"] == "three"


def test_site_file_errors_name_the_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "site.yaml"
    path.write_text("data: x.csv\nmodel: random_forest\nmodle: mlp\n")
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['modle'\]"):
        read_site_file(path)
    path.write_text("model: random_forest\n")
    with pytest.raises(ConfigError, match="`data` is required"):
        read_site_file(path)


def test_node_config_names_a_site_and_its_id_must_agree(sites_root) -> None:  # type: ignore[no-untyped-def]
    path = sites_root / "hospital-a" / "site.yaml"
    assert site_from_node_config({"partition-id": 1}) is None  # the partition mode
    assert site_from_node_config({"site": str(path), "partition-id": 2}).id == 2
    path.write_text(path.read_text() + "id: 0\n")
    with pytest.raises(ConfigError, match="differs from the node's partition-id 2"):
        site_from_node_config({"site": str(path), "partition-id": 2})
    inline = site_from_node_config({"data": "x.csv", "model": "mlp", "partition-id": 1})
    assert inline is not None and inline.model.name == "mlp"


def test_labels_map_by_name_whatever_a_site_holds(sites_root) -> None:  # type: ignore[no-untyped-def]
    """hospital-a never saw a 9 and clinic-c spells digits as numbers: the same class gets
    the same id at every site."""
    public = load_public(sites_root / "public.csv", sha256=None, label_column="diagnosis")
    a = site_dataset(read_site_file(sites_root / "hospital-a" / "site.yaml"), public, NAMES)
    c = site_dataset(read_site_file(sites_root / "clinic-c" / "site.yaml"), public, NAMES)
    assert 9 not in a.y_train and a.num_classes == c.num_classes == 10
    raw_a = (sites_root / "hospital-a" / "records.csv").read_text().splitlines()[1]
    raw_c = (sites_root / "clinic-c" / "records.csv").read_text().splitlines()[1]
    assert NAMES[int(a.y_train[0])] == raw_a.rsplit(",", 1)[1] or len(a.y_test)  # split order
    assert set(a.y_train) | set(a.y_test) == {NAMES.index(n) for n in NAMES[:9]}
    labels_c = {int(line.rsplit(",", 1)[1]) for line in [raw_c]}
    assert labels_c <= set(c.y_train) | set(c.y_test)


def test_a_label_outside_the_set_refuses_the_site(sites_root) -> None:  # type: ignore[no-untyped-def]
    public = load_public(sites_root / "public.csv", sha256=None)
    site = read_site_file(sites_root / "hospital-b" / "site.yaml")
    with pytest.raises(SiteRefusedError, match=r"label\(s\) \['nine'\] are not in the run's"):
        site_dataset(site, public, NAMES[:9])


def test_another_public_set_is_refused_by_its_hash(sites_root) -> None:  # type: ignore[no-untyped-def]
    path = sites_root / "public.csv"
    digest = file_sha256(path)
    assert load_public(path, sha256=digest).sha256 == digest
    path.write_text(path.read_text() + path.read_text().splitlines()[1] + "\n")
    with pytest.raises(PublicSetError, match="every party must hold the same U file"):
        load_public(path, sha256=digest, who="site 2")


def test_config_checks(sites_root) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(sites_root / "run.yaml")
    assert cfg.data.num_clients == 3
    with pytest.raises(ConfigError, match=r"data\.num_clients = 5 and sites\.files lists 3"):
        load_config(sites_root / "run.yaml", ["data.num_clients=5"])
    with pytest.raises(ConfigError, match="cannot run on sites with their own models"):
        load_config(sites_root / "run.yaml", ["algorithm.name=fedavg"])
    with pytest.raises(ConfigError, match="not a SHA-256"):
        load_config(sites_root / "run.yaml", ["sites.public_sha256=abc"])
    with pytest.raises(ConfigError, match=r"set sites\.public"):
        load_config(None, ["sites.labels=[a,b]"])
    assert "sites" not in load_config(None).to_dict()  # partition-mode configs as before


def test_shared_config_fills_the_hash_and_labels_and_drops_site_files(sites_root) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(sites_root / "run.yaml", ["sites.labels=null"])
    shared = shared_config(cfg)
    assert shared.sites.public_sha256 == file_sha256(sites_root / "public.csv")
    assert shared.sites.labels == sorted(NAMES)  # from the sites' files, sorted as text
    assert shared.sites.files == [] and shared.data.num_clients == 3


def test_the_example_runs_in_process_and_reports_no_ground_truth(sites_root, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(sites_root / "run.yaml", SMALL)
    exp = build_experiment(cfg)
    assert [c.id for c in exp.clients] == [0, 1, 2] and exp.partition is None
    # every party standardises with U's statistics: U itself comes out centred
    np.testing.assert_allclose(exp.public_x.mean(axis=0), 0, atol=1e-5)
    result = run_experiment(cfg, tmp_path / "run", progress=False)
    summary = result.summary  # type: ignore[attr-defined]
    assert summary["partition"] == "sites" and summary["labels"] == list(NAMES)
    assert summary["client_models"] == {
        "0": "logistic_regression",
        "1": "mlp",
        "2": "random_forest",
    }
    assert "adjusted_rand_index" not in summary and "K" in summary
    again = run_experiment(cfg, None, progress=False)
    assert again.records[-1]["accuracy"] == result.records[-1]["accuracy"]  # seeded


def test_site_paths_are_looked_up_as_dataset_paths_are(sites_root, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """One resolver: a file the config names is used as given, else found in data.data_dir,
    else in $COSMOSFL_DATA_DIR, for `sites.public` as for `data.dataset`."""
    import dataclasses

    from cosmosfl.data.sources import resolve_data_path
    from cosmosfl.experiment.sites import config_path

    monkeypatch.delenv("COSMOSFL_DATA_DIR", raising=False)
    cfg = load_config(sites_root / "run.yaml", ["data.data_dir=null"])
    monkeypatch.chdir(tmp_path)  # public.csv is not here
    assert config_path(cfg, "public.csv") == resolve_data_path("public.csv", None)
    assert not config_path(cfg, "public.csv").exists()
    in_dir = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, data_dir=str(sites_root)))
    assert config_path(in_dir, "public.csv") == sites_root / "public.csv"
    monkeypatch.setenv("COSMOSFL_DATA_DIR", str(sites_root))
    assert config_path(cfg, "public.csv") == sites_root / "public.csv"
    assert resolve_data_path("public.csv", None) == sites_root / "public.csv"
