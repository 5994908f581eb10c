"""Reports: what `cosmosfl report` (and the end of `compare` and `sweep`) makes of finished runs.

This layer only reads what runs wrote (run directories, sweep.yaml, assembly.yaml): `runset`
loads a comparison's runs, `stats` computes its numbers (final-round mean ± SEM, curves, the †
rule, bytes), `contrasts` the paired differences, `client_gains` each client's gain over
`local`; `tables`, `plots`, `report` (a comparison), `sweep_data` and `ablation` (a sweep),
`assemble` (an ablation from separate compare folders) write them; `folders` tells which kind
of folder it is given. It runs nothing: no layer below imports it.

Names are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "AblationReport": "cosmosfl.reporting.ablation",
    "Report": "cosmosfl.reporting.report",
    "RunSet": "cosmosfl.reporting.runset",
    "folder_kind": "cosmosfl.reporting.folders",
    "load_runs": "cosmosfl.reporting.runset",
    "write_ablation_report": "cosmosfl.reporting.ablation",
    "write_assembled_report": "cosmosfl.reporting.assemble",
    "write_folder_report": "cosmosfl.reporting.folders",
    "write_report": "cosmosfl.reporting.report",
}

__all__ = [
    "AblationReport",
    "Report",
    "RunSet",
    "folder_kind",
    "load_runs",
    "write_ablation_report",
    "write_assembled_report",
    "write_folder_report",
    "write_report",
]

if TYPE_CHECKING:
    from cosmosfl.reporting.ablation import AblationReport, write_ablation_report
    from cosmosfl.reporting.assemble import write_assembled_report
    from cosmosfl.reporting.folders import folder_kind, write_folder_report
    from cosmosfl.reporting.report import Report, write_report
    from cosmosfl.reporting.runset import RunSet, load_runs


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cosmosfl.reporting' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
