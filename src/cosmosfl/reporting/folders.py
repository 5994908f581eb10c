"""What kind of folder a report is asked of, and that kind's report: the one dispatch behind
`cosmosfl report DIR` (and a Python caller reporting a folder it did not write itself).

- an assembly: DIR/assembly.yaml, saved by `cosmosfl report DIR --key ... --cell ...`, redrawn
  from the compare folders it names (assemble.py);
- a sweep: DIR/sweep.yaml, written by `cosmosfl sweep` (ablation.py);
- anything else a comparison: DIR/<algorithm>/seed<k>/ as `cosmosfl compare` writes (report.py).
"""

from __future__ import annotations

from pathlib import Path

from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.grid import SWEEP_FILE, read_sweep
from cosmosfl.reporting.ablation import AblationReport, write_ablation_report
from cosmosfl.reporting.assemble import ASSEMBLY, read_assembly, write_assembled_report
from cosmosfl.reporting.contrasts import parse_base
from cosmosfl.reporting.report import Report, write_report

ASSEMBLY_FOLDER, SWEEP_FOLDER, COMPARE_FOLDER = "assembly", "sweep", "compare"


def folder_kind(root: str | Path) -> str:
    """ "assembly" (assembly.yaml), "sweep" (sweep.yaml) or "compare" (anything else)."""
    root = Path(root)
    if (root / ASSEMBLY).is_file():
        return ASSEMBLY_FOLDER
    if (root / SWEEP_FILE).is_file():
        return SWEEP_FOLDER
    return COMPARE_FOLDER


def write_folder_report(
    root: str | Path, base: str | None = None, versus: list[str] | None = None
) -> Report | AblationReport:
    """The report of the folder `root`, written into it, by the folder's kind.

    `base` (`[KEY=]VALUE`, as `--base` takes it) and `versus` (algorithms) add the paired-
    difference columns of ablation reports; on an assembly, `versus` None keeps the saved one
    (an empty list clears it). A comparison's table compares algorithms already: either one
    there is an error.
    """
    kind = folder_kind(root)
    if kind == ASSEMBLY_FOLDER:
        saved = read_assembly(root)
        assert saved is not None  # the file exists: folder_kind saw it
        values = parse_base(base, saved["keys"]) if base else saved["base"]
        keys, cells, shared = saved["keys"], saved["cells"], saved["shared"]
        chosen = saved["versus"] if versus is None else versus
        return write_assembled_report(root, keys, cells, shared, values, chosen)
    if kind == SWEEP_FOLDER:
        doc = read_sweep(root)
        assert doc is not None
        keys = [a["key"] for a in doc["grid"]]
        return write_ablation_report(root, parse_base(base, keys) if base else {}, versus or [])
    if base or versus:
        raise ConfigError(
            "report: --base and --versus apply to ablation reports (a sweep folder, or --key "
            "with --cell); a compare folder's table.md compares algorithms already"
        )
    return write_report(root)
