"""Folders of images as users keep them, read into plain arrays.

`read_image_folder` returns a dict with `x_train, y_train, x_test, y_test` (images uint8
(N, H, W, C), labels int64 0..M-1) and `classes` (tuple of str, `classes[i]` names label i), the
layout `dataset.from_arrays` validates: `root/<class>/<image>` or `root/train/<class>/...` +
`root/test/<class>/...`. Images are converted to RGB, or to grayscale ("L") when every image is
grayscale by its mode (1, L, LA, I, I;16*, F), then resized to `image_size` x `image_size` with
Pillow's BICUBIC filter; the aspect ratio is not kept. 16-bit grayscale is scaled to 8 bits
(v / 257). Tables live in `data.tabular`, the paper's datasets in their official formats in
`data.official`.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from cosmosfl.data.errors import DatasetFormatError, DatasetNotFoundError
from cosmosfl.data.splitting import check_test_fraction, split_arrays, stratified_test_mask

__all__ = ["IMAGE_EXTENSIONS", "read_image_folder"]

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"})
_GRAY_MODES = frozenset({"1", "L", "LA", "La", "I", "F"})  # plus every "I;16..." variant


# -- image folders -----------------------------------------------------------------------------
def read_image_folder(
    root: str | Path, *, image_size: int = 32, test_fraction: float = 0.2, seed: int = 0
) -> dict[str, Any]:
    """Read a class-per-subfolder image tree into uint8 (N, S, S, C) arrays, S = `image_size`.

    Layouts: `root/<class>/<images>` (then a seeded stratified `test_fraction` split), or
    `root/train/<class>/...` with `root/test/<class>/...` (that split is used; the classes are the
    union of both, sorted; other folders next to them are ignored). Only image files directly in a
    class folder count (png, jpg, jpeg, bmp, gif, webp, tif, tiff, any case); hidden files and
    folders and other files are ignored. GIFs give their first frame, alpha is dropped. Every
    image is resized with BICUBIC to S x S without keeping the aspect ratio, and converted to RGB
    (C=3), or to grayscale (C=1) when every image in the tree has a grayscale mode.
    """
    # The model zoo's input sizes, defined once by the registry (imported here on use: it
    # brings torch, which only reading a folder of images needs to know about).
    from cosmosfl.models.registry import IMAGE_SIZE_RANGE

    lo, hi = IMAGE_SIZE_RANGE
    if type(image_size) is not int or not lo <= image_size <= hi:  # type(): refuse bools too
        raise ValueError(f"image_size must be an int in [{lo}, {hi}], got {image_size!r}")
    test_fraction = check_test_fraction(test_fraction)
    root = Path(root).expanduser()
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise DatasetNotFoundError(f"image folder {str(root)!r} {what}")
    top = _visible_dirs(root)
    split_dirs = {name.lower(): d for name, d in top.items() if name.lower() in ("train", "test")}
    if len(split_dirs) == 2:
        per_split = {s: _visible_dirs(split_dirs[s]) for s in ("train", "test")}
        classes = tuple(sorted(set(per_split["train"]) | set(per_split["test"])))
    else:
        for name, d in split_dirs.items():
            if _visible_dirs(d) and not _images_in(d)[0]:
                other = "test" if name == "train" else "train"
                raise DatasetFormatError(
                    f"{root}: found {d.name}/ holding class folders but no {other}/ next to it; "
                    f"give both train/ and test/, or put the class folders directly in {root}"
                )
        per_split = {"all": top}
        classes = tuple(sorted(top))
    if not classes:
        raise DatasetFormatError(
            f"{root}: no class folders found; expected {root}/<class>/<image files> or "
            f"{root}/train/<class>/... and {root}/test/<class>/..."
        )
    if len(classes) < 2:  # as a table with one label value is refused
        raise DatasetFormatError(
            f"{root}: one class folder ({classes[0]!r}); classification needs at least 2 "
            "classes: add a folder per class"
        )
    files: list[Path] = []
    labels: list[int] = []
    in_test: list[bool] = []
    for split, dirs in per_split.items():
        for name, d in sorted(dirs.items()):
            found, ignored = _images_in(d)
            if not found:
                raise DatasetFormatError(
                    f"{d}: class folder {name!r} holds no images ({ignored} other files "
                    f"ignored); image extensions: {', '.join(sorted(IMAGE_EXTENSIONS))}"
                )
            files += found
            labels += [classes.index(name)] * len(found)
            in_test += [split == "test"] * len(found)
    x = _load_images(files, image_size)
    y = np.asarray(labels, dtype=np.int64)
    if "all" in per_split:
        is_test = stratified_test_mask(y, test_fraction, seed, str(root), classes, "images")
    else:
        is_test = np.asarray(in_test, dtype=bool)
    return {**split_arrays(x, y, is_test), "classes": classes}


def _visible_dirs(folder: Path) -> dict[str, Path]:
    return {
        p.name: p
        for p in folder.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name != "__MACOSX"
    }


def _images_in(folder: Path) -> tuple[list[Path], int]:
    """The image files directly in `folder`, sorted by name, and how many other files it holds."""
    files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    images = sorted((p for p in files if p.suffix.lower() in IMAGE_EXTENSIONS), key=str)
    return images, len(files) - len(images)


# What Pillow raises on a damaged or hostile file: not an image (UnidentifiedImageError, an
# OSError), truncated data (OSError, EOFError), broken headers (SyntaxError, ValueError,
# struct.error, zlib.error), absurd dimensions (DecompressionBombError).
def _pil_errors() -> tuple[type[BaseException], ...]:
    from PIL import Image

    return (OSError, ValueError, EOFError, SyntaxError, struct.error, zlib.error,
            Image.DecompressionBombError)  # fmt: skip


def _load_images(files: list[Path], size: int) -> np.ndarray:
    from PIL import Image

    errors = _pil_errors()

    def fail(path: Path, exc: BaseException) -> DatasetFormatError:
        return DatasetFormatError(
            f"{path}: Pillow cannot read this image ({str(exc).strip() or type(exc).__name__}); "
            "remove or replace the file"
        )

    # First pass reads headers only: the grayscale rule needs every image's mode up front.
    modes = []
    for path in files:
        try:
            with Image.open(path) as im:
                modes.append(im.mode)
        except errors as exc:
            raise fail(path, exc) from exc
    gray = all(m in _GRAY_MODES or m.startswith("I;16") for m in modes)
    out = np.empty((len(files), size, size, 1 if gray else 3), dtype=np.uint8)
    for i, path in enumerate(files):
        try:
            with Image.open(path) as im:
                im = _to_gray(im) if gray else _to_rgb(im)
                im = im.resize((size, size), Image.Resampling.BICUBIC)
                out[i] = np.asarray(im, dtype=np.uint8).reshape(size, size, -1)
        except errors as exc:
            raise fail(path, exc) from exc
    return out


def _to_gray(im: Any) -> Any:
    from PIL import Image

    if im.mode == "I" or im.mode.startswith("I;16") or im.mode == "F":
        # Pillow's convert("L") clips 16-bit values at 255; scale 0..65535 to 0..255 instead.
        a = np.asarray(im, dtype=np.float64)
        a = a if im.mode == "F" else a / 257.0
        return Image.fromarray(np.clip(np.rint(a), 0, 255).astype(np.uint8))
    return im.convert("L")


def _to_rgb(im: Any) -> Any:
    # Palette and alpha images go through RGBA so a palette's transparency is honoured (Pillow
    # warns otherwise); the alpha channel is then dropped.
    if im.mode == "P" or "A" in im.mode or "a" in im.mode:
        im = im.convert("RGBA")
    return im.convert("RGB")
