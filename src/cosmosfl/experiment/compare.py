"""`cosmosfl compare`: several algorithms × seeds on identical splits, resumable.

Every run is the base config with the seed set and the `algorithm` section replaced by the
target algorithm, carrying over each setting of the base algorithm section that the target also
has (epochs, temperature, ...), so training budgets match COSMOS where they mean the same thing.
Partition and client initialisation depend only on the seed and the data/clients sections, so
all algorithms of a seed see the same splits and the same initial client models.

Runs go to `OUT/<algorithm>/seed<k>/`. A finished run whose config equals the one about to run
is skipped, so an interrupted comparison resumes where it stopped. Running writes run
directories and compare.yaml only; the report is the reporting layer's
(`cosmosfl.reporting.report.write_report`, which the CLI calls after a comparison).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cosmosfl.engines.progress import Reporter
from cosmosfl.experiment.build import check_clients
from cosmosfl.experiment.catalog import known_names
from cosmosfl.experiment.config import (
    TOP_LEVEL,
    ConfigError,
    ExperimentConfig,
    algorithm_options,
    apply_overrides,
    changed_default_notices,
    config_from_dict,
    dump_config,
    flatten,
    identity,
    parse_override,
)
from cosmosfl.experiment.result import RunResult
from cosmosfl.experiment.rundir import CHECKPOINT, CONFIG, SUMMARY, RunDirectory, write_atomic
from cosmosfl.experiment.runner import resumable, resume_experiment, run_experiment
from cosmosfl.experiment.summary import exclusion_warning
from cosmosfl.experiment.tracking import Tracker, make_tracker

# Same-named settings that are NOT carried over from the base algorithm section, and why.
# λ weights COSMOS's consistency regulariser r_B; the baselines that accept `lam` have no such
# term in their papers (default 0), so copying COSMOS's λ would change the baseline itself.
# Set it per algorithm when wanted, e.g. `fedmd.lam=5`.
NOT_COPIED = {"lam": "weight of COSMOS's r_B; the baselines have none (default 0)"}


@dataclass(frozen=True)
class PlannedRun:
    algorithm: str
    seed: int
    config: ExperimentConfig
    path: Path


@dataclass
class ComparePlan:
    """All runs of a comparison, validated, before any of them starts."""

    out: Path
    base: ExperimentConfig
    algorithms: list[str]
    seeds: list[int]
    settings: dict[str, dict[str, Any]]  # per algorithm: copied + per-algorithm overrides
    overrides: list[str] = field(default_factory=list)
    runs: list[PlannedRun] = field(default_factory=list)
    # Changed defaults the comparison relies on (said once here, not in every run's header).
    notices: list[str] = field(default_factory=list)

    def describe(self) -> list[str]:
        """What will run, and which settings each algorithm takes from the base config."""
        lines = [
            f"compare: {len(self.algorithms)} algorithms × {len(self.seeds)} seeds = "
            f"{len(self.runs)} runs into {self.out}"
        ]
        for algorithm, settings in self.settings.items():
            shown = ", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults"
            lines.append(f"  {algorithm}: {shown}")
        lines.append(f"  not copied from the base algorithm section: {', '.join(NOT_COPIED)}")
        lines += [f"  note: {notice}" for notice in self.notices]
        return lines


def parse_algorithms(text: str) -> list[str]:
    """`cosmos,fedmd` -> ["cosmos", "fedmd"], checked against the known names."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    allowed = known_names()
    unknown = [n for n in names if n not in allowed]
    if not names or unknown:
        raise ConfigError(
            f"--algorithms = {text!r}: unknown {', '.join(unknown) or '(empty)'}; "
            f"allowed: {', '.join(allowed)}"
        )
    if len(set(names)) != len(names):
        raise ConfigError(f"--algorithms = {text!r} names an algorithm twice")
    return names


def parse_seeds(text: str) -> list[int]:
    """`1,2,3` -> [1, 2, 3]."""
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(
            f"--seeds = {text!r} must be comma-separated integers, e.g. 1,2,3"
        ) from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds = {text!r} must list at least one seed, each once")
    return seeds


def split_overrides(
    overrides: Sequence[str], algorithms: Sequence[str]
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Separate config overrides (`rounds=3`) from per-algorithm ones (`fedmd.distill_epochs=2`)."""
    common: list[str] = []
    per: dict[str, dict[str, Any]] = {a: {} for a in algorithms}
    names = known_names()
    for text in overrides:
        path, value = parse_override(text)
        head = path[0]
        if head == "seed":
            raise ConfigError(f"override {text!r}: the seeds come from --seeds; remove it")
        if head in TOP_LEVEL:
            common.append(text)
            continue
        if head not in names:
            raise ConfigError(
                f"override {text!r}: {head!r} is neither a config key "
                f"({', '.join(TOP_LEVEL)}) nor an algorithm ({', '.join(names)})"
            )
        if head not in per:
            raise ConfigError(
                f"override {text!r} is for {head}, which is not in --algorithms "
                f"({', '.join(algorithms)})"
            )
        options = sorted(algorithm_options(head))
        if len(path) != 2 or path[1] not in options:
            raise ConfigError(
                f"override {text!r}: unknown key {'.'.join(path)}; "
                f"allowed for {head}: {', '.join(f'{head}.{k}' for k in options)}"
            )
        per[head][path[1]] = value
    return common, per


def plan_compare(
    base_raw: dict[str, Any],
    algorithms: Sequence[str],
    seeds: Sequence[int],
    out: str | Path,
    overrides: Sequence[str] = (),
) -> ComparePlan:
    """Build and validate the config of every run (nothing is trained or written)."""
    algorithms, seeds = list(algorithms), list(seeds)
    parse_algorithms(",".join(algorithms))
    parse_seeds(",".join(map(str, seeds)))
    common, per = split_overrides(overrides, algorithms)
    base_with_common = apply_overrides(base_raw, common)
    base = config_from_dict(base_with_common)
    given = set(base_with_common.get("algorithm") or {})  # the keys the user wrote
    make_tracker(base.tracking, "check")  # a missing tracking package fails before any run
    section = {k: v for k, v in base.algorithm.items() if k != "name"}
    plan = ComparePlan(Path(out), base, algorithms, seeds, {}, list(overrides))
    for algorithm in algorithms:
        options = algorithm_options(algorithm)
        own = algorithm == base.algorithm["name"]  # the base algorithm keeps all its settings
        copied = {k: v for k, v in section.items() if k in options and (own or k not in NOT_COPIED)}
        plan.settings[algorithm] = {**copied, **per[algorithm]}
        written = {k: None for k in (given if own else set()) | set(per[algorithm])}
        for notice in changed_default_notices({**written, "name": algorithm}):
            if notice not in plan.notices:
                plan.notices.append(notice)
        for seed in seeds:
            raw = base.to_dict()
            raw["seed"] = seed
            raw["algorithm"] = {"name": algorithm, **plan.settings[algorithm]}
            try:
                cfg = config_from_dict(raw)
                check_clients(cfg)
            except ConfigError as err:
                raise ConfigError(
                    f"{algorithm} seed {seed}: {err} (settings copied from the base config's "
                    f"algorithm section: {', '.join(copied) or 'none'}; change one with "
                    f"{algorithm}.<key>=<value>)"
                ) from None
            path = plan.out / algorithm / f"seed{seed}"
            plan.runs.append(PlannedRun(algorithm, seed, cfg, path))
    return plan


def config_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """`key: old -> new` for every setting that differs (dotted keys), leaving out the sections
    that are not part of an experiment's identity (tracking: where it is logged)."""
    a, b = flatten(identity(old)), flatten(identity(new))
    missing = object()

    def show(d: dict[str, Any], key: str) -> str:
        return repr(d[key]) if key in d else "(absent)"

    return [
        f"{k} = {show(a, k)} there, {show(b, k)} now"
        for k in sorted(set(a) | set(b))
        if a.get(k, missing) != b.get(k, missing)
    ]


def _resolved(old: dict[str, Any]) -> dict[str, Any]:
    """An old run's config with settings added to cosmosfl since then at their defaults, so
    that a new setting alone does not make every finished run look changed."""
    try:
        with warnings.catch_warnings():  # deprecated names in an old run's file: not the user's
            warnings.simplefilter("ignore", DeprecationWarning)
            return yaml.safe_load(dump_config(config_from_dict(old)))
    except ConfigError:
        return old


def run_state(run: PlannedRun) -> tuple[str, list[str]]:
    """'new', 'unfinished', 'finished' (same config) or 'changed' (with the differences)."""
    if not (run.path / SUMMARY).is_file():
        return ("unfinished" if run.path.exists() else "new"), []
    old_path = run.path / CONFIG
    old = yaml.safe_load(old_path.read_text()) if old_path.is_file() else {}
    diffs = config_differences(_resolved(old or {}), yaml.safe_load(dump_config(run.config)))
    return ("changed", diffs) if diffs else ("finished", [])


@dataclass
class CompareOutcome:
    plan: ComparePlan
    ran: list[PlannedRun]
    skipped: list[PlannedRun]


def run_compare(
    plan: ComparePlan,
    *,
    force: bool = False,
    progress: bool = True,
    echo: Callable[[str], None] = print,
) -> CompareOutcome:
    """Run every planned run not already finished with the same config (the report is
    `cosmosfl.reporting.report.write_report` on `plan.out`).

    A finished run with a different config stops the comparison before anything runs (the
    message names the differing keys) unless `force`, which reruns it.
    """
    states = [run_state(run) for run in plan.runs]
    changed = [(run, d) for run, (s, d) in zip(plan.runs, states, strict=True) if s == "changed"]
    if changed and not force:
        raise changed_error(changed, f"{changed[0][0].algorithm} seed {changed[0][0].seed}")
    write_atomic(plan.out / "compare.yaml", _compare_yaml(plan))
    ran, skipped = [], []
    total = len(plan.runs)
    for i, (run, (state, _)) in enumerate(zip(plan.runs, states, strict=True), 1):
        if state == "finished":
            echo(f"[{i}/{total}] skip {run.algorithm} seed {run.seed}: finished")
            skipped.append(run)
            continue
        echo(f"[{i}/{total}] {run.algorithm} seed {run.seed} ... -> {run.path}")
        start = time.perf_counter()
        tags = {"compare": str(plan.out)}
        tracker = run_tracker(run, plan.out, tags)
        result = execute_run(
            run, state, tracker, progress=progress, echo=echo, tag=f"[{i}/{total}]"
        )
        echo(
            f"[{i}/{total}] {run.algorithm} seed {run.seed} done in "
            f"{time.perf_counter() - start:.0f} s: mean accuracy of {result.reported_model} "
            f"{result.mean_accuracy():.4f}"
        )
        warning = exclusion_warning(result.summary or {})
        if warning:
            echo(f"[{i}/{total}] {warning}")
        ran.append(run)
    return CompareOutcome(plan, ran, skipped)


def changed_error(changed: list[tuple[PlannedRun, list[str]]], what: str) -> ConfigError:
    """The error for finished runs whose config differs from the planned one (first named)."""
    run, diffs = changed[0]
    more = f" (and {len(changed) - 1} more finished runs differ)" if len(changed) > 1 else ""
    return ConfigError(
        f"{run.path} holds a finished {what} run with a different config: "
        f"{'; '.join(diffs)}{more}. Pass --force to rerun it, or use another --out"
    )


def run_tracker(run: PlannedRun, out: Path, tags: dict[str, str]) -> Tracker:
    """The tracker of one planned run: named by its path under `out`, tagged with what it is."""
    name = "/".join([out.resolve().name, *run.path.relative_to(out).parts])
    tags = {**tags, "algorithm": run.algorithm, "seed": str(run.seed)}
    return make_tracker(run.config.tracking, name, {**tags, "run_dir": str(run.path.resolve())})


def execute_run(
    run: PlannedRun,
    state: str,
    tracker: Tracker | None = None,
    *,
    progress: bool | Reporter = True,
    echo: Callable[[str], None] = print,
    tag: str = "",
) -> RunResult:
    """Run one planned run that is not finished: resume it from its checkpoint when it has one
    of the same experiment, else start it (over)."""
    if state == "unfinished" and resumable(run.path, run.config):
        echo(f"{tag} resuming from its checkpoint")
        return resume_experiment(run.path, progress=progress, tracker=tracker)
    # A cut-short run of this plan that cannot be resumed (a reference run keeps no
    # checkpoint) is started over; a folder cosmosfl did not make is still refused.
    ours = RunDirectory(run.path).ours
    force = state == "changed" or (run.path / CHECKPOINT).is_file() or ours
    return run_experiment(run.config, run.path, progress=progress, force=force, tracker=tracker)


def _compare_yaml(plan: ComparePlan) -> str:
    doc = {
        "algorithms": plan.algorithms,
        "seeds": plan.seeds,
        "overrides": plan.overrides,
        "not_copied": dict(NOT_COPIED),
        "algorithm_settings": plan.settings,
        "base": plan.base.to_dict(),
    }
    header = "# cosmosfl compare: the base config, algorithms and seeds of this comparison\n"
    return header + yaml.safe_dump(doc, sort_keys=False)
