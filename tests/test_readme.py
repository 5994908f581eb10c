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


ROOT = README.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def heading_anchors(path: Path) -> set[str]:
    """GitHub's (and the site's) anchors of a Markdown file's headings, outside code blocks."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def relative_links(path: Path) -> list[str]:
    """Links of a Markdown file that point into the repository (not URLs), outside code."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_every_relative_link_in_the_readme_points_at_a_file_and_heading():
    links = relative_links(README)
    assert len(links) > 10
    broken = []
    for link in links:
        target, _, anchor = link.partition("#")
        path = (ROOT / target) if target else README
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in heading_anchors(path):
            broken.append(f"{link}: no heading with that anchor")
    assert not broken, broken


def test_the_readme_is_a_front_page():
    text = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    for needed in ("Quickstart: command line", "Quickstart: Python", "Findings at a glance"):
        assert needed in headings
    assert "cosmosfl run" in text and "make demo" in text
    assert len(text.splitlines()) < 250, "reference material belongs on the documentation site"
