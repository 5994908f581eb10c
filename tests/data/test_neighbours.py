"""Neighbours x' of r_B for feature vectors (FeatureNoise), the per-kind dispatch (Neighbours)
and the learner's check that fails before round 1 when it cannot make them."""

import numpy as np
import pytest
import torch
from torch import nn

from cosmosfl.data import Augmentation, FeatureNoise, Neighbours
from cosmosfl.learners import TorchLearner


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_feature_noise_has_the_requested_scale_per_feature() -> None:
    x = torch.zeros(4000, 3)
    out = FeatureNoise(noise_std=0.2, scale=(1.0, 2.0, 0.0))(x, _gen(0))
    std = out.std(dim=0)
    assert std[0].item() == pytest.approx(0.2, rel=0.08)
    assert std[1].item() == pytest.approx(0.4, rel=0.08)
    assert std[2].item() == 0.0  # a feature with no spread is left alone


def test_feature_dropout_zeroes_about_that_share_and_is_seeded() -> None:
    x = torch.ones(2000, 10)
    aug = FeatureNoise(noise_std=0.0, dropout=0.3)
    out = aug(x, _gen(1))
    assert (out == 0).float().mean().item() == pytest.approx(0.3, abs=0.02)
    assert torch.equal(out, aug(x, _gen(1)))
    assert not torch.equal(out, aug(x, _gen(2)))
    assert torch.equal(x, torch.ones(2000, 10))  # the input is not modified


def test_neighbours_dispatch_on_the_kind_of_batch() -> None:
    n = Neighbours(images=Augmentation(max_shift=0, max_rotation=0, noise_std=0.0))
    images = torch.rand(2, 1, 8, 8)
    assert torch.equal(n(images, _gen(0)), images)  # the image branch, with everything off
    vectors = torch.zeros(2, 5)
    assert n(vectors, _gen(0)).abs().sum() > 0  # the vector branch adds noise
    with pytest.raises(ValueError, match=r"no neighbours defined for inputs of shape \(2, 3, 4\)"):
        n(torch.zeros(2, 3, 4), _gen(0))


def test_bad_feature_noise_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="dropout"):
        FeatureNoise(dropout=1.0)
    with pytest.raises(ValueError, match="noise_std"):
        FeatureNoise(noise_std=-1)
    with pytest.raises(ValueError, match="2 values but x has 3"):
        FeatureNoise(scale=(1.0, 1.0))(torch.zeros(1, 3))


def _vector_learner(**kwargs) -> TorchLearner:
    torch.manual_seed(0)
    return TorchLearner(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), **kwargs)


def test_torch_learner_distils_feature_vectors_with_consistency_by_default() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 6)).astype(np.float32)
    targets = np.full((40, 3), 1 / 3, dtype=np.float32)
    learner = _vector_learner()
    learner.check_neighbours(x)  # the default makes neighbours of vectors
    stats = learner.distill(x, targets, epochs=1, lam=5.0)
    assert stats["consistency"] > 0


def test_check_neighbours_names_lam_and_augmentation_when_it_cannot() -> None:
    learner = _vector_learner(augmentation=Augmentation())  # an image augmentation on vectors
    x = np.zeros((4, 6), dtype=np.float32)
    with pytest.raises(ValueError, match=r"shape \(6,\).*lam=0.*augmentation="):
        learner.check_neighbours(x)

    def wrong_shape(batch: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return batch[:, :2]

    with pytest.raises(ValueError, match="must return neighbours of the input's shape"):
        _vector_learner(augmentation=wrong_shape).check_neighbours(x)
