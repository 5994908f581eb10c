"""A run with a privacy budget: ε per site per round in metrics.jsonl and summary.json, equal
to dp-accounting's for the same events, and no fit past the budget."""

import json

import pytest

dp = pytest.importorskip("dp_accounting")
pytest.importorskip("opacus")

from cosmosfl.experiment.build import build_experiment  # noqa: E402
from cosmosfl.experiment.config import ConfigError, config_from_dict  # noqa: E402
from cosmosfl.experiment.runner import run_experiment  # noqa: E402
from cosmosfl.privacy.accountant import RDP_ORDERS  # noqa: E402
from cosmosfl.privacy.aggregate import SubsampleAggregateLearner  # noqa: E402
from cosmosfl.privacy.dpsgd import DPSGDLearner  # noqa: E402

DELTA = 1e-5
Z = 2.0  # noise multiplier of every fit
ROUNDS = 4


def gaussian_epsilon(releases):
    accountant = dp.rdp.RdpAccountant(RDP_ORDERS)
    accountant.compose(dp.GaussianDpEvent(Z), releases)
    return accountant.get_epsilon(DELTA)


# The budget admits two subsample-and-aggregate releases, not three.
BUDGET = (gaussian_epsilon(2) + gaussian_epsilon(3)) / 2


def tiny(**privacy):
    return config_from_dict(
        {
            "rounds": ROUNDS,
            "workers": 1,
            # Under privacy no validation slice (nothing but accounted fits reads private
            # records), so COSMOS runs the paper's recipe (its default gate needs the slice).
            "data": {
                "num_clients": 4,
                "num_groups": 2,
                "max_train": 600,
                "max_test": 200,
                "validation_fraction": 0.0,
            },
            "clients": {"models": {"mlp": 0.5, "logistic_regression": 0.5}},
            "algorithm": {
                "name": "cosmos",
                "recipe": "paper",
                "pretrain_epochs": 1,
                "local_epochs": 1,
                "server_epochs": 1,
                "distill_epochs": 1,
                "target_clusters": 2,
                "server_model": "mlp",
            },
            "privacy": {"delta": DELTA, **privacy},
        }
    )


def dpsgd_epsilon(n, batch, fits):
    batches = -(-n // batch)
    step = dp.PoissonSampledDpEvent(1.0 / batches, dp.GaussianDpEvent(Z))
    accountant = dp.rdp.RdpAccountant(RDP_ORDERS)
    for _ in range(fits):
        accountant.compose(dp.SelfComposedDpEvent(step, batches))  # one epoch per fit
    return accountant.get_epsilon(DELTA)


@pytest.fixture(scope="module")
def private_run(tmp_path_factory):
    cfg = tiny(epsilon=BUDGET, noise_multiplier=Z, shards=3)
    out = tmp_path_factory.mktemp("private") / "run"
    run_experiment(cfg, out, progress=False)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    return cfg, build_experiment(cfg), records, summary


def test_epsilon_per_site_matches_dp_accounting_and_stops_at_the_budget(private_run):
    cfg, exp, records, summary = private_run
    kinds = {c.id: type(c.learner) for c in exp.clients}
    assert set(kinds.values()) == {DPSGDLearner, SubsampleAggregateLearner}
    for c in exp.clients:
        site, n = str(c.id), len(c.train[0])
        fits = 0
        for r in records:
            ledger = r["privacy"][site]
            if kinds[c.id] is SubsampleAggregateLearner:
                expected_fits = min(r["round"], 2)
                expected = gaussian_epsilon(expected_fits)
                assert ledger["refused"] == (1 if r["round"] > 2 else 0)
            else:
                expected_fits = r["round"]
                if dpsgd_epsilon(n, cfg.clients.batch_size, expected_fits) > BUDGET:
                    expected_fits = fits
                expected = dpsgd_epsilon(n, cfg.clients.batch_size, expected_fits)
            assert ledger["fits"] == expected_fits
            assert ledger["epsilon"] == pytest.approx(expected, rel=1e-9)
            assert ledger["epsilon"] <= BUDGET and ledger["budget"] == BUDGET
            fits = expected_fits
        assert summary["privacy"][site]["epsilon"] == records[-1]["privacy"][site]["epsilon"]
        assert len(summary["privacy"][site]["epsilon_per_round"]) == ROUNDS
    refused = [s for s, p in summary["privacy"].items() if p["refused_fits"]]
    assert refused, "the budget was meant to stop the subsample-and-aggregate sites"
    for site in refused:  # nothing spent in the rounds after the budget ran out
        assert summary["privacy"][site]["epsilon_per_round"][str(ROUNDS)] == 0.0
    assert all(not r["rejected"] for r in records)  # a refused fit is no failure


def test_calibrated_run_plans_to_spend_its_budget():
    cfg = tiny(epsilon=4.0)
    exp = build_experiment(cfg)
    for client in exp.clients:
        spent = client.learner.accountant
        assert spent.budget == 4.0 and not spent.charges
    plan = (1,) * ROUNDS
    from cosmosfl.privacy.accountant import epsilon_of
    from cosmosfl.privacy.setup import planned_charges

    for client in exp.clients:
        mech = client.learner.mechanism
        z = client.learner.noise_multiplier
        batch = getattr(client.learner, "batch_size", 1)
        charges = planned_charges(mech, z, plan, len(client.train[0]), batch)
        assert epsilon_of(charges, DELTA) == pytest.approx(4.0, rel=0.02)
        assert epsilon_of(charges, DELTA) <= 4.0 * (1 + 1e-9)
    assert any("DP-SGD" in line for line in exp.privacy)
    assert any("subsample-and-aggregate" in line for line in exp.privacy)


@pytest.mark.parametrize(
    ("privacy", "extra", "message"),
    [
        ({"epsilon": 4.0}, {"algorithm": {"name": "fedavg"}}, "not supported under"),
        ({"epsilon": 4.0}, {"data": {"validation_fraction": 0.2}}, "validation_fraction = 0"),
        ({"epsilon": 8.0, "require_epsilon": 4.0}, {}, "require_epsilon"),
        ({"epsilon": 4.0, "mechanism": "dpsgd"}, {}, "needs a torch learner"),
    ],
)
def test_unsupported_private_settings_are_config_errors(privacy, extra, message):
    raw = {
        "data": {"validation_fraction": 0.0},
        "clients": {"models": {"mlp": 0.5, "logistic_regression": 0.5}},
        "algorithm": {"name": "cosmos", "recipe": "paper"},
        "privacy": privacy,
    }
    raw.update(extra)
    with pytest.raises(ConfigError, match=message):
        build_experiment(config_from_dict(raw))


def test_report_lists_the_epsilon_spent(private_run, tmp_path):
    from cosmosfl.reporting.privacy import privacy_markdown
    from cosmosfl.reporting.runset import Run, RunSet

    _, _, records, summary = private_run
    runset = RunSet(tmp_path, {"cosmos": [Run("cosmos", 1, tmp_path, summary, records)]})
    table = privacy_markdown(runset)
    spent = [s["epsilon"] for s in summary["privacy"].values()]
    refused = sum(s["refused_fits"] for s in summary["privacy"].values())
    assert f"| {max(spent):.3g} | {min(spent):.3g} | {refused} |" in table
    no_privacy = {**summary}
    del no_privacy["privacy"]
    assert (
        privacy_markdown(RunSet(tmp_path, {"local": [Run("local", 1, tmp_path, no_privacy, [])]}))
        is None
    )
