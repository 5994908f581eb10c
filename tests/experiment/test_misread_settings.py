"""Settings and federations that used to be read wrong without a word: 1e-3 as text, a split
that leaves nothing to learn from, a label_map merging two classes."""

from __future__ import annotations

import numpy as np
import pytest

from cosmosfl.data.public import load_public
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.experiment.sites import SiteRefusedError, read_site_file, site_dataset


def test_scientific_notation_is_a_float_in_overrides_and_files(tmp_path):
    cfg = load_config(None, ["algorithm.name=cosmos", "algorithm.server_lr=1e-3"])
    assert cfg.algorithm["server_lr"] == pytest.approx(1e-3)
    path = tmp_path / "c.yaml"
    path.write_text("algorithm:\n  name: cosmos\n  server_lr: 5E-4\n  lam: 1e1\n")
    cfg = load_config(path)
    assert cfg.algorithm["server_lr"] == pytest.approx(5e-4)
    assert cfg.algorithm["lam"] == pytest.approx(10.0)
    assert load_config(None, ["seed=7"]).seed == 7  # integers stay integers


def test_a_split_leaving_too_few_rows_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "t.csv"
    rows = "".join(f"{a:.3f},{b:.3f},{i % 3}\n" for i, (a, b) in enumerate(rng.random((1500, 2))))
    path.write_text("a,b,y\n" + rows)
    over = [f"data.dataset={path}", "data.partition=iid", "data.num_clients=5", "threads=1"]
    build_experiment(load_config(None, over))  # the default split is fine
    with pytest.raises(ConfigError, match=r"too little to learn from: \|U\| = \d .*test_fraction"):
        build_experiment(load_config(None, [*over, "data.test_fraction=0.99"]))


def test_a_label_map_merging_two_labels_is_refused(sites_root):  # type: ignore[no-untyped-def]
    names = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
    path = sites_root / "clinic-c" / "site.yaml"
    rows = (sites_root / "clinic-c" / "records.csv").read_text().splitlines()[1:]
    a, b = sorted({int(r.rsplit(",", 1)[1]) for r in rows})[:2]  # two labels it holds
    path.write_text(path.read_text().replace(f"  {b}: {names[b]}", f"  {b}: {names[a]}"))
    public = load_public(sites_root / "public.csv", sha256=None, label_column="diagnosis")
    with pytest.raises(SiteRefusedError, match=rf"\['{a}', '{b}'\] -> '{names[a]}'"):
        site_dataset(read_site_file(path), public, names)


def test_partition_messages_name_classes_not_ids(tmp_path):
    """A class that only the training rows hold: the message names it ('rare'), not its id."""
    path = tmp_path / "t.csv"
    lines = [f"{i / 10},{'rare' if i % 3 == 2 else 'ab'[i % 3]},train" for i in range(90)]
    lines += [f"{i / 10},{'ab'[i % 2]},test" for i in range(40)]
    path.write_text("x,y,split\n" + "\n".join(lines) + "\n")
    over = [
        f"data.dataset={path}",
        "data.label_column=y",
        "data.partition=pathological",
        "data.num_clients=3",
        "data.classes_per_client=1",
        "data.public_fraction=0.1",
    ]
    from cosmosfl.data import PartitionError

    with pytest.raises(PartitionError, match=r"holds classes \['rare'\], none of which"):
        build_experiment(load_config(None, over))
