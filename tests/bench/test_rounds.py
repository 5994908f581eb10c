"""One round of the paper's setting under a time budget (bench/rounds.py): cut at its deadline,
before a phase or inside the clients' tasks, and projected from the clients it finished."""

import contextlib
import time

from cosmosfl.bench import rounds
from cosmosfl.bench.gpu import TOY

from ..test_bench_gpu import PHASES, ROOT


def toy_round(deadline):
    return rounds.paper_round(
        deadline,
        device="cpu",
        overrides=TOY.round_overrides,
        synthetic=TOY.synthetic,
        config=str(ROOT / rounds.PAPER_CONFIG),
    )


def test_paper_round_past_its_deadline_starts_no_phase():
    result = toy_round(time.perf_counter() - 1)
    assert result["completed"] is False and result["cut_in_phase"] == "local_training"
    assert result["client_tasks"] == 0 and result["projected_total_s"] is None
    assert set(result["phases_not_reached"]) == PHASES
    assert "mean_accuracy" not in result


def test_paper_round_client_tasks_refuse_work_past_the_deadline(monkeypatch):
    # Phases unboxed: the client-side box alone must stop the round, inside its first phase.
    monkeypatch.setattr(rounds, "_boxed_phases", _note_phase_only)
    result = toy_round(time.perf_counter() - 1)
    assert result["completed"] is False and result["cut_in_phase"] == "local_training"
    assert result["client_tasks"] == 0
    assert set(result["seconds"]) == {"local_training", "total"}
    assert set(result["phases_not_reached"]) == PHASES - {"local_training"}


@contextlib.contextmanager
def _note_phase_only(engine, deadline, state):
    original = engine.phase

    @contextlib.contextmanager
    def phase(name):
        state["phase"] = name
        with original(name):
            yield

    engine.phase = phase
    yield


def test_paper_round_outside_a_checkout_uses_the_shipped_preset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ here
    result = rounds.paper_round(
        time.perf_counter() - 1, device="cpu", overrides=TOY.round_overrides, synthetic=(300, 100)
    )
    assert result["config"].endswith("presets/paper-cifar10.yaml")
    assert result["clients"] == 5 and result["completed"] is False


def test_project_round_scales_the_cut_phase_by_the_clients_it_finished():
    seconds = {"local_training": 100.0, "prediction": 10.0, "evaluation": 4.0,
               "clustering": 1.0, "server_distillation": 50.0, "client_distillation": 30.0,
               "total": 195.0}  # fmt: skip
    tasks = [{"phase": "client_distillation"}] * 5 + [{"phase": "local_training"}] * 25
    # 165 s of ended phases + 30 s for 5 of 25 clients -> 150 s for all of them
    assert rounds.project_round(seconds, tasks, 25, "client_distillation") == 165.0 + 150.0
    assert rounds.project_round(seconds, tasks, 25, None) is None
    assert rounds.project_round(seconds, tasks, 25, "prediction") is None  # no task finished
