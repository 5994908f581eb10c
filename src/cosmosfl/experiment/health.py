"""Client models that fail or are degenerate: a broken learner must not pass as a weak one.

A client whose code raises (its model's fit, predict_proba or distill) stops the run with one
line naming the client, its model and the fix (`client_failure`; the traceback is written to
the run directory's client-error.txt).

A client model is degenerate when, on its own training rows, its probabilities are not finite,
are the same for every row (nothing learnt: e.g. the uniform fallback of a learner whose every
refit was rejected), or its accuracy is below always predicting the most common training class.
A run checks every client after round 1 and after the last round; with `strict` (the CLI's
`--strict`) a degenerate client stops the run with one line naming it, its model and the fix;
otherwise it is recorded under `degenerate_clients` in summary.json, printed, and flagged by
`cosmosfl report`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cosmosfl.client import Client
from cosmosfl.engines.progress import Reporter
from cosmosfl.engines.simulation import ClientError
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.parts import Experiment
from cosmosfl.experiment.rundir import CLIENT_ERROR, RunDirectory

__all__ = [
    "BASELINE_TOLERANCE",
    "ClientFailedError",
    "DegenerateModelError",
    "check_models",
    "client_failure",
    "degenerate_clients",
    "describe",
]

# Training accuracy this far below the majority-class share counts as below the baseline
# (a model may tie with the baseline on rows dominated by one class).
BASELINE_TOLERANCE = 0.02
CONSTANT_ATOL = 1e-6


class DegenerateModelError(ConfigError):
    """A client's model is degenerate (strict runs): the user's model, so one line, exit 2."""


class ClientFailedError(ConfigError):
    """A client's model raised, or (strict) sent a rejected reply: one line, exit 2."""


def degenerate_reason(client: Client) -> str | None:
    """Why `client`'s model is degenerate on its own training rows, or None when it is not."""
    x, y = client.train
    if len(y) == 0:
        return None
    probs = np.asarray(client.learner.predict_proba(x), dtype=np.float64)
    if not np.isfinite(probs).all():
        return "its predict_proba returns NaN or inf"
    if len(y) > 1 and float(np.ptp(probs, axis=0).max()) <= CONSTANT_ATOL:
        return "it predicts the same probabilities for every row (it learnt nothing)"
    y = np.asarray(y)
    accuracy = float((probs.argmax(axis=1) == y).mean())
    majority = float(np.bincount(y).max() / len(y))
    if accuracy < majority - BASELINE_TOLERANCE:
        return (
            f"its accuracy on its own training rows, {accuracy:.3f}, is below always "
            f"predicting their most common class ({majority:.3f})"
        )
    return None


def degenerate_clients(
    clients: Sequence[Client], model_names: Sequence[str]
) -> dict[int, dict[str, Any]]:
    """{client id: {model, reason}} for every degenerate client model."""
    out: dict[int, dict[str, Any]] = {}
    for client, name in zip(clients, model_names, strict=True):
        reason = degenerate_reason(client)
        if reason is not None:
            out[int(client.id)] = {"model": name, "reason": reason}
    return out


def describe(found: dict[int, dict[str, Any]], when: str) -> str:
    """One line naming the degenerate clients, their models, why, and what to do."""
    first_id = next(iter(found))
    first = found[first_id]
    others = (
        f" (and {len(found) - 1} more client(s): {sorted(found)[1:6]})" if len(found) > 1 else ""
    )
    return (
        f"{when}: client {first_id}'s model {first['model']!r} is degenerate: {first['reason']}"
        f"{others}; check the model with cosmosfl.testing.check_learner (a model whose "
        "predict_proba columns are out of class order, or NaN, does this)"
    )


def check_models(
    exp: Experiment,
    t: int,
    rounds: int,
    strict: bool,
    reporter: Reporter,
    degenerate: dict[int, dict[str, Any]] | None,
) -> None:
    """Degenerate client models stop a strict run; otherwise they are logged and kept for
    summary.json (after the last round)."""
    found = degenerate_clients(exp.clients, exp.client_models)
    if not found:
        return
    if strict:
        raise DegenerateModelError(describe(found, f"round {t}") + " (--strict)")
    if t == rounds and degenerate is not None:
        degenerate.update(found)
        reporter.log(
            "warning: "
            + describe(found, "after the last round")
            + "; flagged under degenerate_clients in summary.json"
        )


def client_failure(
    err: ClientError, exp: Experiment, run_dir: RunDirectory | None, t: int
) -> ConfigError:
    """A client's code raised (its model's fit, predict_proba or distill): one line naming the
    client, its model and the fix; the traceback goes to the run directory."""
    cid = err.client_id
    names = dict(zip([c.id for c in exp.clients], exp.client_models, strict=True))
    model = names.get(cid, "?") if cid is not None else "?"
    what = (err.error or str(err)).strip().splitlines()[0] if (err.error or str(err)) else ""
    where = ""
    if run_dir is not None and err.client_traceback:
        try:
            (run_dir.path / CLIENT_ERROR).write_text(str(err) + "\n")
            where = f"; the client's traceback is in {run_dir.path / CLIENT_ERROR}"
        except OSError:
            where = ""
    reason = getattr(err, "reason", None)
    if reason and err.error is None:  # a rejected reply under --strict
        what = f"its reply to {err.task!r} was rejected: {reason}"
    elif err.task:
        what = f"{err.task!r} raised {what}"
    return ClientFailedError(
        f"round {t}: client {cid} (model {model!r}) failed: {what}; fix the model (cosmosfl."
        f"testing.check_learner names the broken method){where}"
    )
