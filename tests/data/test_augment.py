"""Batched augmentation: shapes, reproducibility, and what each transform does to pixels."""

from __future__ import annotations

import pytest
import torch

from cosmosfl.data import Augmentation, default_augmentation
from cosmosfl.data.augment import CropFlip, train_augmentation_for

OFF = {"max_shift": 0.0, "max_rotation": 0.0, "hflip": False, "noise_std": 0.0}


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _batch(b: int = 16, c: int = 3, size: int = 12, seed: int = 0) -> torch.Tensor:
    return torch.randn(b, c, size, size, generator=_gen(seed))


def test_shape_dtype_preserved_and_input_untouched() -> None:
    x = _batch()
    before = x.clone()
    for dtype in (torch.float32, torch.float64):
        out = Augmentation(hflip=True)(x.to(dtype), _gen(0))
        assert out.shape == x.shape and out.dtype == dtype and out.device == x.device
    assert torch.equal(x, before)


def test_deterministic_per_generator_seed() -> None:
    aug, x = Augmentation(hflip=True), _batch()
    assert torch.equal(aug(x, _gen(7)), aug(x, _gen(7)))
    assert not torch.allclose(aug(x, _gen(7)), aug(x, _gen(8)))
    g = _gen(7)
    assert not torch.allclose(aug(x, g), aug(x, g))  # the generator advances between calls


def test_zero_strength_is_the_identity() -> None:
    x = _batch()
    out = Augmentation(**OFF)(x, _gen(0))
    assert torch.equal(out, x) and out is not x


def test_hflip_gives_the_image_or_its_mirror_and_both_occur() -> None:
    x = _batch(b=64)
    out = Augmentation(**{**OFF, "hflip": True})(x, _gen(1))
    same = [torch.equal(o, i) for o, i in zip(out, x, strict=True)]
    mirrored = [torch.equal(o, i.flip(-1)) for o, i in zip(out, x, strict=True)]
    assert all(s or m for s, m in zip(same, mirrored, strict=True))
    assert any(same) and any(mirrored)


def _shifted(img: torch.Tensor, dx: int, dy: int) -> torch.Tensor:
    """img moved right by dx and down by dy pixels, zero filled (a crop of a padded image)."""
    out = torch.zeros_like(img)
    h, w = img.shape[-2:]
    src = img[..., max(0, -dy) : h - max(0, dy), max(0, -dx) : w - max(0, dx)]
    out[..., max(0, dy) : h - max(0, -dy), max(0, dx) : w - max(0, -dx)] = src
    return out


@pytest.mark.parametrize("size", [8, 16])
def test_shift_is_a_whole_pixel_translation_with_zero_padding(size: int) -> None:
    x = _batch(b=32, c=1, size=size)
    out = Augmentation(**{**OFF, "max_shift": 0.25})(x, _gen(2))
    limit = int(0.25 * size)
    offsets = [(dx, dy) for dx in range(-limit, limit + 1) for dy in range(-limit, limit + 1)]
    seen = set()
    for o, i in zip(out, x, strict=True):
        match = [d for d in offsets if torch.allclose(o, _shifted(i, *d), atol=1e-5)]
        assert match, "output is not a shifted copy of its input"
        seen.add(match[0])
    assert len(seen) > 3  # shifts vary across the batch


def test_rotation_turns_the_image_about_its_centre() -> None:
    # A single bright pixel off-centre moves along a circle; the centre of mass keeps its radius.
    x = torch.zeros(8, 1, 33, 33)
    x[:, :, 16, 26] = 1.0  # 10 pixels right of the centre (16, 16)
    out = Augmentation(**{**OFF, "max_rotation": 30.0})(x, _gen(3))
    ys, xs = torch.meshgrid(torch.arange(33.0), torch.arange(33.0), indexing="ij")
    mass = out.sum(dim=(1, 2, 3))
    cy = (out[:, 0] * ys).sum(dim=(1, 2)) / mass
    cx = (out[:, 0] * xs).sum(dim=(1, 2)) / mass
    radius = torch.sqrt((cy - 16) ** 2 + (cx - 16) ** 2)
    angle = torch.rad2deg(torch.atan2(cy - 16, cx - 16)).abs()
    assert torch.allclose(radius, torch.full_like(radius, 10.0), atol=0.5)
    assert angle.max() <= 30.5 and angle.max() > 5  # within +-30 degrees, and really turning


def test_noise_ball_has_the_requested_scale() -> None:
    x = _batch(b=64, size=16)
    out = Augmentation(**{**OFF, "noise_std": 0.05})(x, _gen(4))
    assert (out - x).std().item() == pytest.approx(0.05, rel=0.05)


def test_works_on_eight_pixel_images_and_empty_batches() -> None:
    aug = default_augmentation(natural=False)
    out = aug(_batch(b=4, c=1, size=8), _gen(5))
    assert out.shape == (4, 1, 8, 8) and torch.isfinite(out).all()
    assert aug(torch.zeros(0, 1, 8, 8), _gen(5)).shape == (0, 1, 8, 8)


def test_default_augmentation_flips_only_natural_images() -> None:
    assert default_augmentation(natural=True).images.hflip
    assert not default_augmentation(natural=False).images.hflip
    assert Augmentation()(_batch(b=2)).shape == (2, 3, 12, 12)  # the global RNG works too


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_shift", 1.0), ("max_shift", -0.1), ("max_rotation", -1.0), ("noise_std", -0.5)],
)
def test_invalid_settings_are_rejected(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        Augmentation(**{field: value})


def test_rejects_non_image_input() -> None:
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        Augmentation()(torch.zeros(3, 8, 8))
    with pytest.raises(ValueError, match="floating-point"):
        Augmentation()(torch.zeros(2, 1, 8, 8, dtype=torch.uint8))


def test_crop_flip_shifts_whole_pixels_and_flips():
    g = torch.Generator().manual_seed(0)
    x = torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).reshape(2, 1, 6, 6) + 1
    out = CropFlip(pad=2, hflip=False)(x, g)
    assert out.shape == x.shape
    for i in range(2):  # every output is x shifted by (dy, dx) with zeros where it came in
        found = False
        for dy in range(-2, 3):
            for dx in range(-2, 3):
                shifted = torch.zeros_like(x[i, 0])
                src = x[i, 0, max(dy, 0) : 6 + min(dy, 0), max(dx, 0) : 6 + min(dx, 0)]
                shifted[max(-dy, 0) : 6 + min(-dy, 0), max(-dx, 0) : 6 + min(-dx, 0)] = src
                found |= torch.equal(out[i, 0], shifted)
        assert found
    flipped = CropFlip(pad=0, hflip=True)(x.repeat(16, 1, 1, 1), torch.Generator().manual_seed(1))
    kinds = {torch.equal(o, x[0]) or torch.equal(o, x[1]) for o in flipped}
    assert kinds == {True, False}  # some flipped, some not
    assert torch.equal(CropFlip(pad=0, hflip=False)(x, g), x)


def test_crop_flip_is_seeded():
    x = torch.randn(8, 3, 16, 16)
    a = CropFlip()(x, torch.Generator().manual_seed(3))
    b = CropFlip()(x, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


def test_train_augmentation_only_for_images_of_16_px_and_more():
    assert train_augmentation_for((1, 8, 8), natural=False) is None
    assert train_augmentation_for((10,), natural=False) is None
    assert train_augmentation_for((3, 32, 32), natural=True) == CropFlip(pad=4, hflip=True)
    assert train_augmentation_for((1, 28, 28), natural=False) == CropFlip(pad=4, hflip=False)
