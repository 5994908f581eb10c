"""The README's Python example runs verbatim and does what it says."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_python_example_runs(capsys):
    blocks = python_blocks()
    assert len(blocks) == 1, "the README should hold exactly one Python example"
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)
    result = namespace["result"]
    clients = namespace["clients"]
    kinds = {type(c.learner).__name__ for c in clients}
    assert kinds == {"TorchLearner", "SklearnLearner"}
    assert set(result.clusters) == set(range(10))
    assert len(result.records) == 3
    assert 0.0 <= result.mean_accuracy() <= 1.0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 4
