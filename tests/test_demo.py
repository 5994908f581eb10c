"""`make demo` runs the comparison in the Makefile and ends with the accuracy table, each
algorithm's per-client gain over `local`, the files written and the pointer to the ablations.
The test runs the Makefile's own command line, shrunk to one round of one epoch each."""

import shlex
from pathlib import Path

from cosmosfl.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "rounds=1",
    "workers=1",
    "algorithm.pretrain_epochs=1",
    "algorithm.server_epochs=1",
    "algorithm.distill_epochs=1",
]


def demo_recipe() -> list[str]:
    """The command lines of the Makefile's `demo` target."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = lines.index("demo: $(STAMP)") + 1
    recipe = []
    for line in lines[start:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def test_demo_is_a_compare_of_cosmos_comet_and_local_that_points_to_the_ablations():
    compare, pointer = demo_recipe()
    argv = shlex.split(compare)
    assert argv[0].endswith("cosmosfl") and argv[1] == "compare"
    assert set(argv[argv.index("--algorithms") + 1].split(",")) >= {"cosmos", "comet", "local"}
    assert (ROOT / argv[argv.index("--config") + 1]).is_file()
    assert pointer.startswith("@echo") and "docs/ablations.md" in pointer
    assert (ROOT / "docs" / "ablations.md").is_file()


def test_demo_ends_with_the_table_the_per_client_gains_and_the_files(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the Makefile's paths are relative to the checkout
    argv = shlex.split(demo_recipe()[0])[1:]
    argv[argv.index("--out") + 1] = str(tmp_path / "demo")
    argv[argv.index("--seeds") + 1] = "1"
    assert main([*argv, "--quiet", *TINY]) == 0
    out = capsys.readouterr().out.rstrip().splitlines()

    table = out.index(next(line for line in out if line.startswith("# Personalized accuracy")))
    rows = [line.split("|")[1].strip() for line in out[table:] if line.startswith("| ")]
    assert {"COSMOS", "COMET", "local (reference)"} <= set(rows)
    gains = [line for line in out[table:] if " vs `local`, per client: " in line]
    assert [line.split(" vs ")[0] for line in gains] == ["COSMOS", "COMET"]
    written = [line.removeprefix("wrote ") for line in out if line.startswith("wrote ")]
    assert out[-len(written) :] == [f"wrote {p}" for p in written], "the output ends with the files"
    names = {Path(p).name for p in written}
    assert {"table.md", "client-gains.md", "curves.png", "client-gains.png"} <= names
    assert out.index(gains[-1]) < len(out) - len(written), "the gains come before the files"
    assert all(Path(p).is_file() for p in written)
