"""Image folders, official CIFAR-100 pickles and EMNIST IDX files, made in miniature here."""

from __future__ import annotations

import gzip
import io
import os
import pickle
import pickletools
import struct
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cosmosfl.data.errors import DatasetFormatError, DatasetNotFoundError
from cosmosfl.data.image_folders import read_image_folder
from cosmosfl.data.official import (
    find_cifar100,
    find_emnist,
    read_cifar100_python,
    read_emnist_idx,
)

RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)


# -- image folders -----------------------------------------------------------------------------
def _image(path: Path, colour: object, mode: str = "RGB", size: tuple[int, int] = (8, 8)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size, colour).save(path)  # type: ignore[arg-type]


def _tree(root: Path, per_class: int = 5) -> Path:
    for name, colour in (("zebra", RED), ("ant", GREEN), ("cat", BLUE)):
        for i in range(per_class):
            _image(root / name / f"{i}.png", colour)
    return root


def test_class_folders_sorted_split_and_pixels_exact(tmp_path: Path) -> None:
    root = _tree(tmp_path / "imgs")
    d = read_image_folder(root, image_size=8, test_fraction=0.4)
    assert d["classes"] == ("ant", "cat", "zebra")
    assert d["x_train"].shape == (9, 8, 8, 3) and d["x_test"].shape == (6, 8, 8, 3)
    assert d["x_train"].dtype == np.uint8 and d["y_train"].dtype == np.int64
    assert np.bincount(d["y_test"]).tolist() == [2, 2, 2]  # stratified
    colour = {0: GREEN, 1: BLUE, 2: RED}
    for split in ("train", "test"):
        for x, y in zip(d[f"x_{split}"], d[f"y_{split}"], strict=True):
            assert (x == colour[int(y)]).all()  # same size: no resampling, exact pixels


def test_split_is_seeded(tmp_path: Path) -> None:
    root = tmp_path / "imgs"
    for i in range(12):
        _image(root / "a" / f"{i:02d}.png", (i * 20, 0, 0))
        _image(root / "b" / f"{i:02d}.png", (0, i * 20, 0))
    d0, again, d1 = (read_image_folder(root, image_size=8, seed=s) for s in (0, 0, 1))
    np.testing.assert_array_equal(d0["x_test"], again["x_test"])
    assert not np.array_equal(d0["x_test"], d1["x_test"])
    # Original (file-name) order within each split: red rises through class a's images.
    reds = d0["x_train"][d0["y_train"] == 0][:, 0, 0, 0].astype(int)
    assert (np.diff(reds) > 0).all()


def test_hidden_and_non_image_files_ignored_extensions_any_case(tmp_path: Path) -> None:
    root = _tree(tmp_path / "imgs", per_class=2)
    _image(root / "ant" / "UPPER.PNG", GREEN)
    _image(root / "ant" / "photo.jpeg", GREEN)
    (root / "ant" / "notes.txt").write_text("not an image")
    (root / "ant" / ".DS_Store").write_bytes(b"\0\1")
    _image(root / ".thumbs" / "x.png", RED)  # hidden folder: not a class
    _image(root / "ant" / ".hidden.png", RED)
    d = read_image_folder(root, image_size=8, test_fraction=0.5)
    assert d["classes"] == ("ant", "cat", "zebra")
    assert np.bincount(np.concatenate([d["y_train"], d["y_test"]])).tolist() == [4, 2, 2]


def test_train_test_layout_is_used_and_classes_are_the_union(tmp_path: Path) -> None:
    _image(tmp_path / "train" / "b" / "0.png", BLUE)
    _image(tmp_path / "train" / "b" / "1.png", BLUE)
    _image(tmp_path / "train" / "a" / "0.png", RED)
    _image(tmp_path / "test" / "a" / "0.png", RED)
    _image(tmp_path / "test" / "c" / "0.png", GREEN)  # a class only in test
    d = read_image_folder(tmp_path, image_size=8)
    assert d["classes"] == ("a", "b", "c")
    assert d["y_train"].tolist() == [0, 1, 1] and d["y_test"].tolist() == [0, 2]
    assert (d["x_test"][1] == GREEN).all()


def test_train_without_test_folder_is_explained(tmp_path: Path) -> None:
    _image(tmp_path / "train" / "a" / "0.png", RED)
    with pytest.raises(DatasetFormatError, match=r"train/ holding class folders but no test/"):
        read_image_folder(tmp_path)


def test_grayscale_only_when_every_image_is_grayscale(tmp_path: Path) -> None:
    for i in range(3):
        _image(tmp_path / "g" / "a" / f"{i}.png", 40, mode="L")
        _image(tmp_path / "g" / "b" / f"{i}.png", 1, mode="1")
    d = read_image_folder(tmp_path / "g", image_size=8, test_fraction=0.34)
    x = np.concatenate([d["x_train"], d["x_test"]])
    y = np.concatenate([d["y_train"], d["y_test"]])
    assert x.shape == (6, 8, 8, 1)
    assert (x[y == 0] == 40).all() and (x[y == 1] == 255).all()
    _image(tmp_path / "g" / "b" / "rgb.png", (10, 20, 30))  # one colour image: all become RGB
    d = read_image_folder(tmp_path / "g", image_size=8, test_fraction=0.34)
    x = np.concatenate([d["x_train"], d["x_test"]])
    y = np.concatenate([d["y_train"], d["y_test"]])
    assert x.shape[-1] == 3
    assert (x[y == 0] == 40).all()  # grey replicated into R, G and B


def test_sixteen_bit_grayscale_is_scaled_not_clipped(tmp_path: Path) -> None:
    for name, value in (("a", 257 * 100), ("b", 65535)):
        for i in range(2):
            path = tmp_path / name / f"{i}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.full((8, 8), value, dtype=np.uint16)).save(path)
    d = read_image_folder(tmp_path, image_size=8, test_fraction=0.5)
    x = np.concatenate([d["x_train"], d["x_test"]])
    y = np.concatenate([d["y_train"], d["y_test"]])
    assert x.shape[-1] == 1 and (x[y == 0] == 100).all() and (x[y == 1] == 255).all()


def test_resize_ignores_aspect_ratio(tmp_path: Path) -> None:
    img = np.zeros((10, 40, 3), dtype=np.uint8)
    img[:, :20] = RED
    img[:, 20:] = BLUE
    for name in ("a", "b"):
        for i in range(2):
            (tmp_path / name).mkdir(exist_ok=True)
            Image.fromarray(img).save(tmp_path / name / f"{i}.png")
    d = read_image_folder(tmp_path, image_size=16, test_fraction=0.5)
    x = d["x_train"][0]
    assert x.shape == (16, 16, 3)  # the 4:1 image fills the square: stretched, not padded
    assert tuple(x[8, 0]) == RED and tuple(x[8, 15]) == BLUE


def test_unreadable_image_names_the_file(tmp_path: Path) -> None:
    root = _tree(tmp_path / "imgs", per_class=2)
    (root / "cat" / "broken.png").write_bytes(b"definitely not a png")
    with pytest.raises(DatasetFormatError, match=r"broken\.png: Pillow cannot read this image"):
        read_image_folder(root, image_size=8)
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), np.uint8)).save(
        buf, "PNG"
    )
    (root / "cat" / "broken.png").write_bytes(buf.getvalue()[:200])  # header fine, data cut
    with pytest.raises(DatasetFormatError, match=r"broken\.png"):
        read_image_folder(root, image_size=8)


def test_empty_root_and_empty_class_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetFormatError, match="no class folders found"):
        read_image_folder(tmp_path / "empty")
    root = _tree(tmp_path / "imgs", per_class=2)
    (root / "dog").mkdir()
    (root / "dog" / "readme.md").write_text("x")
    with pytest.raises(DatasetFormatError, match=r"class folder 'dog' holds no images \(1 other"):
        read_image_folder(root)
    with pytest.raises(DatasetNotFoundError, match="does not exist"):
        read_image_folder(tmp_path / "nowhere")


@pytest.mark.parametrize("size", [7, 65, 32.0, True, "32"])
def test_image_size_must_be_int_in_model_range(tmp_path: Path, size: object) -> None:
    with pytest.raises(ValueError, match=r"image_size must be an int in \[8, 64\]"):
        read_image_folder(tmp_path, image_size=size)  # type: ignore[arg-type]


# -- CIFAR-100 python pickles ------------------------------------------------------------------
class _Python2Pickler(pickle._Pickler):  # type: ignore[name-defined]
    """Writes str and bytes as Python 2 `str` (BINSTRING), as the official files were written."""

    dispatch = pickle._Pickler.dispatch.copy()  # type: ignore[attr-defined]

    def save_bytes(self, obj: bytes) -> None:
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", n) + obj)
        self.memoize(obj)

    def save_str(self, obj: str) -> None:
        self.save_bytes(obj.encode("ascii"))

    dispatch[bytes] = save_bytes
    dispatch[str] = save_str


def _py2_pickle(obj: object) -> bytes:
    buf = io.BytesIO()
    _Python2Pickler(buf, protocol=2).dump(obj)
    # Python 2's numpy named its module numpy.core.multiarray.
    return buf.getvalue().replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")


NAMES = [b"apple", b"bee", b"castle", b"dolphin"]


def _cifar_images(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)


def _cifar_part(images: np.ndarray, labels: list[int]) -> dict[bytes, object]:
    # The official layout: channel-major rows (1024 R, 1024 G, 1024 B), Python lists of labels.
    return {
        b"filenames": [f"img_{i}.png".encode() for i in range(len(images))],
        b"batch_label": b"training batch 1 of 1",
        b"fine_labels": labels,
        b"coarse_labels": [0] * len(labels),
        b"data": images.transpose(0, 3, 1, 2).reshape(len(images), 3072),
    }


def _cifar_folder(
    root: Path, dump: Callable[[object], bytes] = _py2_pickle
) -> tuple[Path, np.ndarray, np.ndarray]:
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    train, test = _cifar_images(6, 0), _cifar_images(3, 1)
    (folder / "train").write_bytes(dump(_cifar_part(train, [0, 1, 2, 3, 3, 1])))
    (folder / "test").write_bytes(dump(_cifar_part(test, [2, 0, 1])))
    meta = {b"fine_label_names": NAMES, b"coarse_label_names": [b"things"]}
    (folder / "meta").write_bytes(dump(meta))
    return folder, train, test


def test_official_cifar_pickles_need_only_numpy_array_globals(tmp_path: Path) -> None:
    folder, _, _ = _cifar_folder(tmp_path)
    raw = (folder / "train").read_bytes()
    found = {arg for op, arg, _ in pickletools.genops(raw) if op.name == "GLOBAL"}
    assert found == {"numpy.core.multiarray _reconstruct", "numpy ndarray", "numpy dtype"}


def test_cifar100_channel_major_to_nhwc(tmp_path: Path) -> None:
    folder, train, test = _cifar_folder(tmp_path)
    d = read_cifar100_python(folder)
    assert d["classes"] == ("apple", "bee", "castle", "dolphin")
    assert d["x_train"].shape == (6, 32, 32, 3) and d["x_train"].dtype == np.uint8
    assert d["x_train"].flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(d["x_train"], train)
    np.testing.assert_array_equal(d["x_test"], test)
    assert d["y_train"].dtype == np.int64 and d["y_train"].tolist() == [0, 1, 2, 3, 3, 1]
    # Spot check against the raw row: green of pixel (row 1, col 2) sits at 1024 + 1 * 32 + 2.
    row = _cifar_part(train, [0] * 6)[b"data"][4]  # type: ignore[index]
    assert d["x_train"][4, 1, 2, 1] == row[1024 + 32 + 2]
    assert d["x_train"][4, 31, 0, 2] == row[2048 + 31 * 32]


def test_cifar100_python3_protocol2_pickles_and_parent_folder(tmp_path: Path) -> None:
    # Re-pickled under Python 3 (bytes go through _codecs.encode); found from the parent folder.
    _, train, _ = _cifar_folder(tmp_path, dump=lambda o: pickle.dumps(o, protocol=2))
    d = read_cifar100_python(tmp_path)
    np.testing.assert_array_equal(d["x_train"], train)
    assert find_cifar100(tmp_path) == tmp_path / "cifar-100-python"


def test_cifar100_tarball_read_in_memory(tmp_path: Path) -> None:
    folder, _, test = _cifar_folder(tmp_path / "src")
    tar_path = tmp_path / "data" / "cifar-100-python.tar.gz"
    tar_path.parent.mkdir()
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(folder, arcname="cifar-100-python")
    assert find_cifar100(tar_path.parent) == tar_path
    d = read_cifar100_python(tar_path.parent)
    np.testing.assert_array_equal(d["x_test"], test)
    assert sorted(os.listdir(tar_path.parent)) == ["cifar-100-python.tar.gz"]  # nothing extracted
    assert find_cifar100(tmp_path / "src" / "cifar-100-python") is None


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_pickle_calling_os_system_is_refused(tmp_path: Path) -> None:
    folder, _, _ = _cifar_folder(tmp_path)
    marker = tmp_path / "pwned"
    (folder / "meta").write_bytes(pickle.dumps({b"fine_label_names": _Evil(marker)}, protocol=2))
    with pytest.raises(
        DatasetFormatError, match=r"meta: the pickle asks for (posix|nt|os)\.system"
    ):
        read_cifar100_python(folder)
    assert not marker.exists()
    (folder / "meta").write_bytes(pickle.dumps([eval], protocol=2))  # builtins too
    with pytest.raises(DatasetFormatError, match=r"asks for (__builtin__|builtins)\.eval"):
        read_cifar100_python(folder)
    # The one non-numpy global allowed, _codecs.encode, only turns latin1 text into bytes.
    (folder / "meta").write_bytes(b"c_codecs\nencode\n(Vabc\nVrot13\ntR.")
    with pytest.raises(DatasetFormatError, match="encoding 'rot13' is not allowed"):
        read_cifar100_python(folder)


def test_cifar100_bad_layouts(tmp_path: Path) -> None:
    folder, train, _ = _cifar_folder(tmp_path)
    (folder / "train").write_bytes(_py2_pickle({b"data": train[:, :, :, 0], b"fine_labels": [0]}))
    with pytest.raises(DatasetFormatError, match=r"train: 'data' must be a uint8 array of shape"):
        read_cifar100_python(folder)
    part = _cifar_part(train, [0, 1, 2, 3, 9, 1])
    (folder / "train").write_bytes(_py2_pickle(part))
    with pytest.raises(DatasetFormatError, match=r"fine labels span \[0, 9\] but meta names 4"):
        read_cifar100_python(folder)
    (folder / "train").write_bytes(b"\x80\x02garbage")
    with pytest.raises(DatasetFormatError, match="train: not a readable CIFAR pickle"):
        read_cifar100_python(folder)
    (folder / "test").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"\['test'\] not found"):
        read_cifar100_python(folder)


# -- EMNIST IDX ----------------------------------------------------------------------------------
def _idx(array: np.ndarray) -> bytes:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim)
    return header + struct.pack(f">{array.ndim}I", *array.shape) + array.astype(np.uint8).tobytes()


def _upright(n: int) -> np.ndarray:
    """Asymmetric images: a bar along the top row, and a dot at row 5, column 20."""
    img = np.zeros((n, 28, 28), dtype=np.uint8)
    img[:, 0, :] = 200
    img[:, 5, 20] = 255
    img[:, 27, 27] = np.arange(n)  # tells the images apart
    return img


def _emnist(
    folder: Path,
    split: str = "balanced",
    labels: tuple[int, ...] = (0, 1, 2, 1),
    mapping: str | None = None,
) -> np.ndarray:
    folder.mkdir(parents=True, exist_ok=True)
    up = _upright(len(labels))
    for part in ("train", "test"):
        raw = up.transpose(0, 2, 1)  # the official files store every image transposed
        (folder / f"emnist-{split}-{part}-images-idx3-ubyte.gz").write_bytes(
            gzip.compress(_idx(raw))
        )
        y = np.asarray(labels, dtype=np.uint8)
        (folder / f"emnist-{split}-{part}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(y)))
    if mapping is not None:
        (folder / f"emnist-{split}-mapping.txt").write_text(mapping)
    return up


def test_emnist_images_come_back_upright_with_mapping_names(tmp_path: Path) -> None:
    up = _emnist(tmp_path / "gzip", mapping="0 48\n1 65\n2 97\n")
    assert find_emnist(tmp_path) == tmp_path / "gzip"
    d = read_emnist_idx(tmp_path)
    assert d["x_train"].shape == (4, 28, 28, 1) and d["x_train"].dtype == np.uint8
    np.testing.assert_array_equal(d["x_train"][..., 0], up)
    assert (d["x_test"][:, 0, :, 0] == 200).all() and (d["x_test"][:, 5, 20, 0] == 255).all()
    assert d["y_train"].dtype == np.int64 and d["y_train"].tolist() == [0, 1, 2, 1]
    assert d["classes"] == ("0", "A", "a")


def test_emnist_without_mapping_and_letters_shift(tmp_path: Path) -> None:
    _emnist(tmp_path / "a")
    assert read_emnist_idx(tmp_path / "a")["classes"] == ("0", "1", "2")
    _emnist(tmp_path / "b", "letters", labels=(1, 2, 3), mapping="1 65 97\n2 66 98\n3 67 99\n")
    d = read_emnist_idx(tmp_path / "b", split="letters")
    assert d["classes"] == ("Aa", "Bb", "Cc") and d["y_test"].tolist() == [0, 1, 2]


def test_emnist_not_found_and_bad_split(tmp_path: Path) -> None:
    assert find_emnist(tmp_path) is None
    with pytest.raises(DatasetNotFoundError, match=r"emnist-balanced-train-images-idx3-ubyte\.gz"):
        read_emnist_idx(tmp_path)
    with pytest.raises(ValueError, match="EMNIST split must be one of"):
        read_emnist_idx(tmp_path, split="../etc")


def _corrupt(folder: Path, name: str, raw: bytes, compress: bool = True) -> None:
    (folder / f"emnist-balanced-{name}.gz").write_bytes(gzip.compress(raw) if compress else raw)


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("train-images-idx3-ubyte", b"\x08\x03\x00\x00" + bytes(40), "not an IDX magic number"),
        ("train-labels-idx1-ubyte", b"\x00\x00\x0d\x01" + bytes(8), r"type byte is 0x0d"),
        (
            "train-labels-idx1-ubyte",
            b"\x00\x00\x08\x03" + bytes(16),
            "has 3 dimensions, expected 1",
        ),
        ("test-labels-idx1-ubyte", b"\x00\x00\x08\x01\x00", "header is truncated"),
        ("test-images-idx3-ubyte", _idx(np.zeros((4, 28, 28), np.uint8))[:-100], "truncated"),
        ("test-labels-idx1-ubyte", _idx(np.zeros(3, np.uint8)), "4 images but 3 labels"),
    ],
)
def test_emnist_corrupt_idx_files(tmp_path: Path, name: str, raw: bytes, message: str) -> None:
    _emnist(tmp_path)
    _corrupt(tmp_path, name, raw)
    with pytest.raises(DatasetFormatError, match=message):
        read_emnist_idx(tmp_path)


def test_emnist_gz_that_is_not_gzip_and_bad_mapping(tmp_path: Path) -> None:
    _emnist(tmp_path, mapping="0 48\n1 x\n")
    with pytest.raises(DatasetFormatError, match=r"mapping\.txt: line 2 '1 x' is invalid"):
        read_emnist_idx(tmp_path)
    (tmp_path / "emnist-balanced-mapping.txt").write_text("0 48\n1 49\n")
    with pytest.raises(DatasetFormatError, match=r"labels span \[0, 2\] but .* names labels 0..1"):
        read_emnist_idx(tmp_path)
    _corrupt(tmp_path, "train-images-idx3-ubyte", b"plain bytes", compress=False)
    with pytest.raises(DatasetFormatError, match="not a readable gzip file"):
        read_emnist_idx(tmp_path)


# -- by name, through load_dataset -------------------------------------------------------------
def test_load_dataset_finds_the_official_formats_by_name(tmp_path: Path) -> None:
    from cosmosfl.data import load_dataset

    _, train, _ = _cifar_folder(tmp_path)
    ds = load_dataset("cifar100", data_dir=tmp_path, cache_dir=tmp_path / "cache")
    assert ds.kind == "images" and ds.natural  # photos: flips are label-preserving
    assert np.array_equal(ds.x_train, train)
    assert ds.classes[0] == NAMES[0].decode()
    up = _emnist(tmp_path / "gzip", mapping="0 48\n1 49\n2 65\n")
    em = load_dataset("emnist_balanced", data_dir=tmp_path, cache_dir=tmp_path / "cache")
    assert np.array_equal(em.x_train[..., 0], up) and em.classes == ("0", "1", "A")
