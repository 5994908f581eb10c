"""The communication benchmark (bench/communication.py) runs the seed it is given."""


def test_communication_benchmark_runs_the_seed_it_is_given(monkeypatch):
    import pytest

    from cosmosfl.bench import communication

    seen = []

    def fake_config(data_dir, config, overrides):
        seen.append(overrides)
        raise RuntimeError("stop before training")

    monkeypatch.setattr(communication, "paper_scale", lambda codecs: {})
    monkeypatch.setattr(communication, "cifar_config", fake_config)
    with pytest.raises(RuntimeError, match="stop"):
        communication.run(seed=7, codecs=("float32",))
    assert "seed=7" in seen[0]
