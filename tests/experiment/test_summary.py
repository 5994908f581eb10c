"""The run summary (experiment/summary.py): fault and rejection counts, and the clients excluded
in the final round, named in the summary and in a warning."""

from cosmosfl.experiment import simulate

from ..engines.test_faults import PUBLIC, Fixed, Probe, make_clients


def test_summary_counts_faults_and_rejections():
    from cosmosfl.experiment.summary import summarize

    result = simulate(
        Probe(), make_clients(*[Fixed() for _ in range(5)]), PUBLIC, rounds=4,
        faults={"dropout": 0.2, "corrupt": 0.2, "corruption": "nan", "byzantine": 0.2}, seed=3,
    )  # fmt: skip
    summary = summarize(result)
    events = [f for r in result.records for f in r["faults"]]
    assert summary["injected_faults"] == {
        m: sum(f["fault"] == m for f in events) for m in {f["fault"] for f in events}
    }
    assert summary["rejected_replies"] == summary["injected_faults"].get("corrupt", 0) > 0
    assert len(summary["byzantine"]) == 1


def test_clients_excluded_at_the_end_are_named_in_the_summary_and_a_warning():
    from cosmosfl.experiment.summary import exclusion_warning, summarize

    result = simulate(
        Probe(), make_clients(*[Fixed() for _ in range(5)]), PUBLIC, rounds=3,
        faults={"corrupt": 0.4, "corruption": "nan"}, seed=3,
    )  # fmt: skip
    last = {r["client"] for r in result.records[-1]["rejected"]}
    assert last  # the seed corrupts someone in the last round
    summary = summarize(result)
    assert set(map(int, summary["excluded_in_final_round"])) == last
    warning = exclusion_warning(summary)
    assert warning is not None and f"{len(last)} client(s)" in warning
    assert all(str(c) in warning for c in last)
    clean = summarize(simulate(Probe(), make_clients(Fixed(), Fixed()), PUBLIC, rounds=1))
    assert "excluded_in_final_round" not in clean and exclusion_warning(clean) is None
