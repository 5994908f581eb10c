"""The one client builder: a party's client from its samples, for a partition's share of one
dataset (build.py) and for a site's own file (sites.py) alike, so both seed, slice and
standardise a client the same way."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cosmosfl.client import Client
from cosmosfl.core.seeds import derive_seed
from cosmosfl.data import Dataset
from cosmosfl.experiment.config import ExperimentConfig
from cosmosfl.experiment.model_spec import ModelSpec
from cosmosfl.experiment.parts import make_learner, validation_holdout

__all__ = ["build_client"]


def build_client(
    cfg: ExperimentConfig,
    cid: int,
    spec: ModelSpec,
    dataset: Dataset,
    train: np.ndarray,
    test: np.ndarray,
    prepare: Callable[[np.ndarray], np.ndarray],
) -> Client:
    """Client `cid`, made the same way for a partition's share and a site's own file: `train`
    / `test` index `dataset`'s splits; a seeded `data.validation_fraction` of `train` is its
    validation slice; its learner is seeded from the config's seed and the id; its inputs are
    standardised by `prepare` (U's statistics)."""
    tr, va = validation_holdout(
        train, cfg.data.validation_fraction, derive_seed(cfg.seed, "val", cid)
    )
    seed = derive_seed(cfg.seed, "client", cid)
    learner = make_learner(spec, cfg, dataset, seed, dataset.num_classes, client_id=cid)

    def rows(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return prepare(dataset.x_train[idx]), dataset.y_train[idx]

    return Client(
        cid,
        learner,
        rows(tr),
        (prepare(dataset.x_test[test]), dataset.y_test[test]),
        validation=rows(va) if len(va) else None,
    )
