"""What the learner checks share: the data, the factory, the global random state, helpers."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from cosmosfl.learners.base import Learner

# Predictions of two learners that should be identical may differ by float rounding only.
SAME_ATOL = 1e-5


class CheckError(AssertionError):
    """A conformance suite's failures: `failures` maps each failed check to its message and
    `skipped` each check not run to why; the message lists both."""

    subject = "check(s)"  # what failed, in the message
    not_run = "Not run:"

    def __init__(
        self, name: str, failures: dict[str, str], skipped: dict[str, str] | None = None
    ) -> None:
        self.failures = failures
        self.skipped = dict(skipped or {})
        lines = [f"{name} failed {len(failures)} {self.subject}:"]
        lines += [f"- {check}: {message}" for check, message in failures.items()]
        if self.skipped:
            lines.append(self.not_run)
            lines += [f"- {check}: {why}" for check, why in self.skipped.items()]
        super().__init__("\n".join(lines))


class _Failed(Exception):
    pass


class _Skipped(Exception):
    pass


def run_check(
    name: str,
    call: Callable[[], object],
    needs: Iterable[str],
    failures: dict[str, str],
    blocked: dict[str, str],
    report: Any,
) -> None:
    """Run one check of a suite into `report` (its `passed` and `skipped`), `failures` or
    `blocked` (not run: a check it needs did not pass). A crash inside a check is a failure of
    that check, not of the suite."""
    failed = [need for need in needs if need in failures or need in blocked]
    if failed:
        blocked[name] = f"not run: it needs {', '.join(failed)}, which did not pass"
        return
    try:
        call()
    except _Skipped as why:
        report.skipped[name] = str(why)
    except _Failed as err:
        failures[name] = str(err)
    except Exception as err:
        failures[name] = f"raised {type(err).__name__}: {err}"
    else:
        report.passed.append(name)


@dataclass
class _Data:
    x: np.ndarray  # private training inputs
    y: np.ndarray
    public: np.ndarray  # unlabeled inputs for predict_proba and distill (U)
    num_classes: int


def _factory(learner: Learner | Callable[[int], Learner]) -> Callable[[int], Learner]:
    if isinstance(learner, Learner):
        template = copy.deepcopy(learner)
        return lambda seed: copy.deepcopy(template)
    if callable(learner):
        return learner
    raise TypeError(
        f"check_learner takes a Learner or a function seed -> Learner, got {type(learner)}"
    )


def _data(
    x: np.ndarray | None, y: np.ndarray | None, m: int, shape: tuple[int, ...], seed: int
) -> _Data:
    if (x is None) != (y is None):
        raise ValueError("give both x and y, or neither (then synthetic data is used)")
    if x is not None and y is not None:
        x, y = np.asarray(x), np.asarray(y)
        if len(x) != len(y) or len(x) < 4:
            raise ValueError(f"x and y need the same length >= 4, got {len(x)} and {len(y)}")
        rng = np.random.default_rng(seed)
        public = x[rng.permutation(len(x))[: max(len(x) // 3, 2)]]
        return _Data(x, y.astype(np.int64), public, m)
    # Each class is a random prototype plus noise: learnable in a few epochs by any model.
    rng = np.random.default_rng(seed)
    prototypes = rng.normal(size=(m, *shape)).astype(np.float32)

    def draw(per_class: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.permutation(np.repeat(np.arange(m), per_class))
        noise = 0.3 * rng.normal(size=(len(labels), *shape))
        return (prototypes[labels] + noise).astype(np.float32), labels.astype(np.int64)

    xs, ys = draw(12)
    public, _ = draw(6)
    return _Data(xs, ys, public, m)


@contextmanager
def _global_rng_restored() -> Iterator[None]:
    """The checks move the global random state on purpose; the caller gets theirs back."""
    import torch

    saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.set_rng_state(saved[2])


def _disturb_global_rng(k: int) -> None:
    """Move every global random stream, so a learner that draws from them is not reproducible."""
    import torch

    random.seed(1000 + k)
    np.random.seed(1000 + k)
    torch.manual_seed(1000 + k)


def _fitted(make: Callable[[int], Learner], data: _Data, seed: int, epochs: int) -> Learner:
    learner = make(seed)
    learner.fit(data.x, data.y, epochs=epochs)
    return learner


def _shifted_targets(probs: np.ndarray) -> np.ndarray:
    """Soft targets that disagree with the predictions: each row's mass on the next class."""
    m = probs.shape[1]
    targets = np.full(probs.shape, 0.1 / m, dtype=np.float32)
    targets[np.arange(len(probs)), (probs.argmax(axis=1) + 1) % m] += 0.9
    return targets


def _kl(targets: np.ndarray, probs: np.ndarray) -> float:
    """KL(targets ‖ probs), mean over rows: the distillation loss (core/distill.py), with the
    predicted probabilities' logarithms as its logits."""
    import torch

    from cosmosfl.core.distill import kl_to_targets

    log_p = torch.from_numpy(np.log(np.clip(probs.astype(np.float64), 1e-12, None)))
    return float(kl_to_targets(log_p, torch.from_numpy(targets.astype(np.float64))))


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
