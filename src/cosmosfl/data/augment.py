"""Batched neighbours x' of x: the neighbourhoods behind the consistency regulariser r_B.

The paper's r_B compares a model's prediction at x with its predictions at nearby points:
for images, translations, small rotations, flips where sensible, plus a small noise ball
(`Augmentation`); for feature vectors, which have no geometry to shift or rotate, a Gaussian
noise ball scaled per feature and optional feature dropout (`FeatureNoise`). `Neighbours`
picks one by the input's kind. Everything is done on whole batches and all randomness comes
from the caller's generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = [
    "Augmentation",
    "CropFlip",
    "FeatureNoise",
    "Neighbours",
    "default_augmentation",
    "train_augmentation_for",
]


@dataclass(frozen=True)
class Augmentation:
    """Random shift + rotation (zero padding), optional horizontal flip, then Gaussian noise."""

    max_shift: float = 0.125  # translation as a fraction of the image size, whole pixels
    max_rotation: float = 10.0  # degrees, uniform in [-max_rotation, max_rotation]
    hflip: bool = False  # random horizontal flip; only for natural images
    noise_std: float = 0.05  # std of the noise ball, in standardised input units

    def __post_init__(self) -> None:
        checks = (
            ("max_shift", self.max_shift, 0.0 <= self.max_shift < 1.0, "in [0, 1)"),
            ("max_rotation", self.max_rotation, 0.0 <= self.max_rotation <= 180.0, "in [0, 180]"),
            ("noise_std", self.noise_std, 0.0 <= self.noise_std < math.inf, "finite and >= 0"),
        )
        for field, value, ok, allowed in checks:
            if not ok:
                raise ValueError(f"Augmentation.{field} must be {allowed}, got {value!r}")

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """A randomly transformed copy of the batch x (B, C, H, W), same dtype and device."""
        if x.ndim != 4 or not x.is_floating_point():
            raise ValueError(
                f"x must be a floating-point (B, C, H, W) tensor, got shape {tuple(x.shape)} "
                f"dtype {x.dtype}"
            )
        b, _, h, w = x.shape
        # Draw on the generator's device (CPU by default) for reproducibility, then move.
        where = generator.device if generator is not None else torch.device("cpu")
        u = torch.rand(b, 4, generator=generator, device=where).to(x.device)
        out = x
        if b and (self.max_shift > 0 or self.max_rotation > 0):
            out = self._affine(out, u[:, :3] * 2 - 1, h, w)
        if self.hflip:
            out = torch.where((u[:, 3] < 0.5).view(b, 1, 1, 1), out.flip(-1), out)
        if self.noise_std > 0:
            noise = torch.randn(x.shape, generator=generator, device=where, dtype=torch.float32)
            out = out + self.noise_std * noise.to(x.device, x.dtype)
        return out.clone() if out is x else out

    def _affine(self, x: torch.Tensor, s: torch.Tensor, h: int, w: int) -> torch.Tensor:
        """Shift by whole pixels and rotate, via one affine_grid/grid_sample call per batch.

        s holds uniform [-1, 1) draws per sample: (x shift, y shift, angle).
        """
        dx = torch.round(s[:, 0] * self.max_shift * w)  # pixels
        dy = torch.round(s[:, 1] * self.max_shift * h)
        angle = s[:, 2] * math.radians(self.max_rotation)
        cos, sin = torch.cos(angle), torch.sin(angle)
        # Normalised coordinates span 2 units per side; rotate in pixel space (aspect-correct).
        theta = torch.stack(
            [
                torch.stack([cos, -sin * h / w, 2 * dx / w], dim=1),
                torch.stack([sin * w / h, cos, 2 * dy / h], dim=1),
            ],
            dim=1,
        )
        work = x if x.dtype in (torch.float32, torch.float64) else x.float()
        grid = F.affine_grid(theta.to(work.dtype), list(work.shape), align_corners=False)
        out = F.grid_sample(work, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        return out.to(x.dtype)


@dataclass(frozen=True)
class FeatureNoise:
    """Neighbours of feature vectors: x' = x + noise_std * sd * N(0, 1), then each feature
    set to 0 with probability `dropout`.

    `sd` is one scale per feature: 1 by default, which is each feature's standard deviation on
    U once features are standardised with U's statistics (what `cosmosfl run` does), so the
    noise is `noise_std` of every feature's spread whatever its units. A dropped feature is
    set to 0, U's mean after that standardisation: the neighbour "does not know" the feature.
    """

    noise_std: float = 0.1
    dropout: float = 0.0
    scale: tuple[float, ...] | None = None  # per-feature sd for unstandardised inputs

    def __post_init__(self) -> None:
        if not 0.0 <= self.noise_std < math.inf:
            raise ValueError(f"FeatureNoise.noise_std must be finite, >= 0, got {self.noise_std}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"FeatureNoise.dropout must be in [0, 1), got {self.dropout}")
        if self.scale is not None and not all(0 <= v < math.inf for v in self.scale):
            raise ValueError("FeatureNoise.scale must hold finite values >= 0, one per feature")

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """A randomly perturbed copy of the batch x (B, D), same dtype and device."""
        if x.ndim != 2 or not x.is_floating_point():
            raise ValueError(
                f"x must be a floating-point (B, D) tensor of feature vectors, got shape "
                f"{tuple(x.shape)} dtype {x.dtype}"
            )
        if self.scale is not None and len(self.scale) != x.shape[1]:
            raise ValueError(
                f"FeatureNoise.scale has {len(self.scale)} values but x has {x.shape[1]} features"
            )
        where = generator.device if generator is not None else torch.device("cpu")
        out = x
        if self.noise_std > 0:
            noise = torch.randn(x.shape, generator=generator, device=where, dtype=torch.float32)
            if self.scale is not None:
                noise = noise * torch.tensor(self.scale, dtype=torch.float32, device=where)
            out = out + self.noise_std * noise.to(x.device, x.dtype)
        if self.dropout > 0:
            keep = torch.rand(x.shape, generator=generator, device=where) >= self.dropout
            out = out * keep.to(x.device, x.dtype)
        return out.clone() if out is x else out


@dataclass(frozen=True)
class Neighbours:
    """The neighbour x' of r_B for whatever a batch holds: `images` for (B, C, H, W) batches,
    `vectors` for (B, D) batches; anything else is a clear error."""

    images: Augmentation = Augmentation()
    vectors: FeatureNoise = FeatureNoise()

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if x.ndim == 4:
            return self.images(x, generator)
        if x.ndim == 2:
            return self.vectors(x, generator)
        raise ValueError(
            f"no neighbours defined for inputs of shape {tuple(x.shape)}: r_B knows (B, C, H, W) "
            "images and (B, D) feature vectors"
        )


def default_augmentation(natural: bool) -> Neighbours:
    """The defaults: for images shifts of 1/8 of the image, +-10 degrees, noise 0.05, flips for
    photos; for feature vectors Gaussian noise of 0.1 standard deviations per feature."""
    return Neighbours(images=Augmentation(hflip=bool(natural)))


@dataclass(frozen=True)
class CropFlip:
    """The standard supervised-training augmentation of small images: a random crop of the
    zero-padded image (a shift of up to `pad` whole pixels each way) and, for natural images, a
    random horizontal flip. Batched; randomness from the caller's generator."""

    pad: int = 4
    hflip: bool = True

    def __post_init__(self) -> None:
        if self.pad < 0:
            raise ValueError(f"CropFlip.pad must be >= 0, got {self.pad}")

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if x.ndim != 4:
            raise ValueError(f"x must be a (B, C, H, W) tensor, got shape {tuple(x.shape)}")
        b, _, h, w = x.shape
        where = generator.device if generator is not None else torch.device("cpu")
        offsets = torch.randint(0, 2 * self.pad + 1, (b, 2), generator=generator, device=where)
        flips = torch.rand(b, generator=generator, device=where) < 0.5
        offsets, flips = offsets.to(x.device), flips.to(x.device)
        out = x
        if self.pad > 0 and b:
            padded = F.pad(x, (self.pad, self.pad, self.pad, self.pad))
            rows = offsets[:, 0, None] + torch.arange(h, device=x.device)  # (B, H)
            cols = offsets[:, 1, None] + torch.arange(w, device=x.device)  # (B, W)
            batch = torch.arange(b, device=x.device)[:, None, None]
            # Advanced indexing around the channel slice gives (B, H, W, C).
            out = padded[batch, :, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)
        if self.hflip and b:
            out = torch.where(flips.view(b, 1, 1, 1), out.flip(-1), out)
        return out.contiguous() if out is not x else out.clone()


def train_augmentation_for(image_shape: tuple[int, ...], natural: bool) -> CropFlip | None:
    """`clients.train_augmentation: true` for these inputs: crop (pad 1/8 of the side) and, for
    natural images, flip; None for non-images and images under 16 px (8x8 digits), where a
    shift of one pixel already removes an eighth of the strokes."""
    if len(image_shape) != 3 or min(image_shape[1:]) < 16:
        return None
    return CropFlip(pad=max(1, round(min(image_shape[1:]) / 8)), hflip=bool(natural))
