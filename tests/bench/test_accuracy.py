"""The time-to-accuracy benchmark (bench/accuracy.py): its time box stops client work at the
deadline and logs what ran."""


def test_time_box_stops_client_work_at_the_deadline_and_logs_what_ran():
    import time

    import pytest

    from cosmosfl.bench.accuracy import _OverBudget, _time_box

    class FakeClient:
        def __init__(self, cid):
            self.id, self.calls = cid, 0

        def handle(self, message):
            self.calls += 1
            return "reply"

    class Msg:
        task = "train_local"

    clients, log = [FakeClient(0), FakeClient(1)], []
    _time_box(clients, ["cnn", "alexnet"], time.perf_counter() + 3600, log)
    assert clients[1].handle(Msg()) == "reply"
    assert (
        log[0]["client"] == 1 and log[0]["model"] == "alexnet" and log[0]["task"] == "train_local"
    )
    late = [FakeClient(0)]
    _time_box(late, ["cnn"], time.perf_counter() - 1, log)
    with pytest.raises(_OverBudget):
        late[0].handle(Msg())
    assert late[0].calls == 0  # refused before doing any work
