"""Sites that bring their own files carry their own privacy settings; the run config can
require a minimum guarantee of every site."""

import pytest

pytest.importorskip("opacus")
pytest.importorskip("dp_accounting")

from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.experiment.sites import SiteRefusedError, read_site_file

SMALL = ["rounds=2", "threads=1", "algorithm.pretrain_epochs=2", "algorithm.local_epochs=1",
         "data.validation_fraction=0", "algorithm.recipe=paper"]  # fmt: skip


def add_privacy(site_file, text):
    site_file.write_text(site_file.read_text() + f"privacy: {text}\n")


def test_each_site_keeps_its_own_budget_within_the_runs_requirement(sites_root):
    add_privacy(sites_root / "hospital-a" / "site.yaml", "{epsilon: 2.0}")
    cfg = load_config(
        sites_root / "run.yaml", [*SMALL, "privacy.require_epsilon=4", "privacy.epsilon=4"]
    )
    exp = build_experiment(cfg)
    budgets = {c.id: c.learner.accountant.budget for c in exp.clients}
    assert budgets == {0: 2.0, 1: 4.0, 2: 4.0}
    assert len(exp.privacy) == 3 and "budget ε = 2" in exp.privacy[0]


def test_a_site_below_the_required_guarantee_is_refused(sites_root):
    add_privacy(sites_root / "clinic-c" / "site.yaml", "{epsilon: 8.0}")
    cfg = load_config(sites_root / "run.yaml", [*SMALL, "privacy.require_epsilon=4"])
    with pytest.raises(SiteRefusedError, match=r"requires every site to keep ε <= 4"):
        build_experiment(cfg)


def test_site_privacy_keys_are_checked(sites_root):
    path = sites_root / "hospital-b" / "site.yaml"
    add_privacy(path, "{require_epsilon: 1.0}")  # the run's setting, not a site's
    with pytest.raises(ConfigError, match="privacy takes a mapping of epsilon"):
        read_site_file(path)
    path.write_text(path.read_text().replace("{require_epsilon: 1.0}", "{epsilon: -1}"))
    cfg = load_config(sites_root / "run.yaml", SMALL)
    with pytest.raises(ConfigError, match=r"privacy.epsilon = -1"):
        build_experiment(cfg)


def test_partition_mode_requirement_needs_a_budget():
    from cosmosfl.experiment.config import config_from_dict

    with pytest.raises(ConfigError, match=r"require_epsilon = 4\.0 needs privacy\.epsilon"):
        config_from_dict({"privacy": {"require_epsilon": 4}})
