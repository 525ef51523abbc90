"""Training data for the convergence check: CIFAR-10 (the paper's) and scikit-learn's digits (offline).

Both come out as the same :class:`Dataset`: uint8 images ``(N, 32, 32, 3)`` channels-last and int32
labels, so the recipe in :mod:`resnet_lab.convergence.train` does not know which one it trains on.

* ``cifar10``: a local copy in the python-pickle layout (``data_batch_1..5``, ``test_batch``) given by
  ``data_dir``, else Keras' cache, else Keras' downloader when the network allows. Nothing falls back to
  another dataset: when CIFAR-10 cannot be had, :class:`~resnet_lab.errors.UsageError` says how to provide it.
* ``digits``: the 1,797 8×8 digits that ship inside scikit-learn (no download), scaled ×4 to 32×32 by
  pixel repetition and copied to 3 channels; a stratified 80/20 train/test split.

:class:`BatchStream` is the training input: shuffling, the paper's augmentation (4-pixel pad, random
32×32 crop, horizontal flip) and normalization in NumPy, driven by one seeded generator whose state is
saved in checkpoints, so a resumed run sees exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from resnet_lab.core.choices import check_choice
from resnet_lab.core.errors import UsageError

DATASETS = ("cifar10", "digits")
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_FILES = (*CIFAR10_TRAIN_FILES, "test_batch")
CIFAR10_CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)
NORMALIZATIONS = ("channel", "pixel")
HOW_TO_GET_CIFAR10 = (
    f"download {CIFAR10_URL} (python version), extract it and pass its cifar-10-batches-py folder "
    "as data_dir / --data-dir, or use data 'digits' offline"
)


@dataclass(frozen=True)
class Dataset:
    """Train and test images, uint8 ``(N, 32, 32, 3)``, with int32 labels ``(N,)``."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: tuple[str, ...]
    source: str  # where the arrays came from: a folder, Keras' cache, scikit-learn

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def summary(self) -> dict[str, Any]:
        """Sizes and origin, one flat dict (for tables and provenance)."""
        return {
            "data": self.name, "train_images": len(self.y_train), "test_images": len(self.y_test),
            "image_shape": list(self.x_train.shape[1:]), "classes": self.num_classes, "source": self.source,
        }


# ------------------------------------------------------------------------------------------ CIFAR-10
def keras_cache_dirs() -> list[Path]:
    """Where Keras' ``cifar10.load_data()`` leaves the extracted batches (Keras 3, then Keras 2 layout)."""
    home = Path(os.environ.get("KERAS_HOME") or Path.home() / ".keras").expanduser()
    return [
        home / "datasets" / "cifar-10-batches-py-target" / "cifar-10-batches-py",
        home / "datasets" / "cifar-10-batches-py",
    ]


def _missing_files(folder: Path) -> list[str]:
    return [name for name in CIFAR10_FILES if not (folder / name).is_file()]


def find_cifar10(data_dir: str | os.PathLike = "") -> Path | None:
    """The folder holding the six CIFAR-10 pickles, or None when there is no local copy.

    Args:
        data_dir: a folder given by the user: the batches folder itself or the folder it was extracted
            into (``<data_dir>/cifar-10-batches-py``). Given but incomplete is a :class:`UsageError`.
            Empty: look in Keras' cache (see :func:`keras_cache_dirs`).
    """
    if data_dir:
        base = Path(data_dir).expanduser()
        for folder in (base, base / "cifar-10-batches-py"):
            if not _missing_files(folder):
                return folder
        if not base.is_dir():
            raise UsageError(f"CIFAR-10 data_dir {base} does not exist; {HOW_TO_GET_CIFAR10}")
        missing = ", ".join(_missing_files(base))
        raise UsageError(f"CIFAR-10 data_dir {base} lacks {missing}; {HOW_TO_GET_CIFAR10}")
    for folder in keras_cache_dirs():
        if not _missing_files(folder):
            return folder
    return None


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """The CIFAR pickles hold dicts, lists, bytes and NumPy arrays: refuse every other global.

    A pickle can run arbitrary code through ``find_class``; a data folder should not be able to.
    Copies rewritten by Python 3 also use ``_codecs.encode`` (bytes at protocol 2) or NumPy's
    ``_frombuffer`` (protocol 5): both only build data.
    """

    _ALLOWED = frozenset({
        ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.numeric", "_frombuffer"), ("_codecs", "encode"),
    })

    def find_class(self, module: str, name: str) -> Any:
        module = module.replace("numpy.core", "numpy._core", 1) if module.startswith("numpy.core") else module
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing {module}.{name} in a CIFAR-10 batch file")


def read_cifar_batch(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 pickle → (uint8 ``(n, 32, 32, 3)``, int32 ``(n,)``).

    The file is a dict with ``data`` (n × 3072 uint8, each row R, G, B planes of 32×32) and ``labels``;
    keys are bytes in the original (Python 2) files and str in copies rewritten by Python 3.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            raw = _NumpyOnlyUnpickler(f, encoding="bytes").load()
        d = {k.decode() if isinstance(k, bytes) else k: v for k, v in raw.items()}
        data = np.asarray(d["data"], dtype=np.uint8)
        labels = np.asarray(d["labels"], dtype=np.int32)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, KeyError, TypeError, ValueError) as e:
        raise UsageError(f"{path} is not a CIFAR-10 python batch ({type(e).__name__}: {e})") from e
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
        raise UsageError(f"{path}: expected data (n, 3072) and n labels, got {data.shape} and {labels.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() > 9):
        raise UsageError(f"{path}: labels outside 0..9")
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # planes → channels-last
    return np.ascontiguousarray(images), labels


def load_cifar10_dir(folder: str | os.PathLike) -> Dataset:
    """Read ``data_batch_1..5`` and ``test_batch`` from a folder (see :func:`find_cifar10`)."""
    folder = Path(folder)
    parts = [read_cifar_batch(folder / name) for name in CIFAR10_TRAIN_FILES]
    x_test, y_test = read_cifar_batch(folder / "test_batch")
    return Dataset(
        name="cifar10",
        x_train=np.concatenate([p[0] for p in parts]), y_train=np.concatenate([p[1] for p in parts]),
        x_test=x_test, y_test=y_test, classes=CIFAR10_CLASSES, source=str(folder),
    )


def _download_cifar10() -> Dataset:
    """Keras' loader: downloads into Keras' cache on first use. Any failure → UsageError with the way out."""
    try:
        import keras

        (x_train, y_train), (x_test, y_test) = keras.datasets.cifar10.load_data()
    except Exception as e:  # URLError, HTTP errors, a corrupt archive: all mean "not available here"
        raise UsageError(
            f"CIFAR-10 is not on this machine and the download failed ({e}); {HOW_TO_GET_CIFAR10}"
        ) from e
    if x_train.shape[1:] != (32, 32, 3):  # keras' image_data_format() was channels_first
        x_train, x_test = x_train.transpose(0, 2, 3, 1), x_test.transpose(0, 2, 3, 1)
    return Dataset(
        name="cifar10",
        x_train=np.ascontiguousarray(x_train), y_train=y_train.reshape(-1).astype(np.int32),
        x_test=np.ascontiguousarray(x_test), y_test=y_test.reshape(-1).astype(np.int32),
        classes=CIFAR10_CLASSES, source=f"keras.datasets.cifar10 ({CIFAR10_URL})",
    )


# -------------------------------------------------------------------------------------------- digits
def load_digits(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """scikit-learn's bundled 8×8 digits as 32×32×3 uint8 (pixel repetition ×4, grey copied to RGB)."""
    from sklearn.datasets import load_digits as sk_load_digits
    from sklearn.model_selection import train_test_split

    bunch = sk_load_digits()
    grey = np.round(bunch.images * (255.0 / 16.0)).astype(np.uint8)  # 0..16 → 0..255
    big = grey.repeat(4, axis=1).repeat(4, axis=2)  # (n, 32, 32): nearest-neighbour ×4
    x = np.repeat(big[..., None], 3, axis=-1)
    y = bunch.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=test_fraction, stratify=y, random_state=seed
    )
    return Dataset(
        name="digits", x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test,
        classes=tuple(str(i) for i in range(10)),
        source="sklearn.datasets.load_digits (bundled, 8×8 → 32×32)",
    )


# ------------------------------------------------------------------------------------------ dispatch
def check_available(name: str, data_dir: str = "", download: bool = True) -> str:
    """Fail fast, before TensorFlow is imported: is ``name`` loadable here? Returns where it will come from.

    For CIFAR-10 without a local copy and ``download`` on, the answer is only known after trying;
    :func:`load` then raises the same kind of error.
    """
    check_choice("data", name, DATASETS)
    if name == "digits":
        if data_dir:
            raise UsageError("data_dir is for CIFAR-10 only; 'digits' ships inside scikit-learn")
        try:
            import sklearn  # noqa: F401
        except ImportError as e:
            raise UsageError("data 'digits' needs scikit-learn: pip install scikit-learn") from e
        return "scikit-learn (bundled)"
    folder = find_cifar10(data_dir)
    if folder is not None:
        return str(folder)
    if not download:
        caches = " or ".join(str(p) for p in keras_cache_dirs())
        raise UsageError(f"CIFAR-10 not found in {caches} and downloading is off; {HOW_TO_GET_CIFAR10}")
    return f"download ({CIFAR10_URL})"


def load(name: str, data_dir: str = "", download: bool = True) -> Dataset:
    """The dataset ``name`` ('cifar10' or 'digits'); see the module docstring for where it comes from."""
    check_available(name, data_dir, download)
    if name == "digits":
        return load_digits()
    folder = find_cifar10(data_dir)
    return load_cifar10_dir(folder) if folder is not None else _download_cifar10()


# ----------------------------------------------------------------------------------- normalization
def normalization(x_train: np.ndarray, mode: str = "channel") -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) to apply as ``(x - mean) / std``, from the training images (0..255 scale).

    ``channel``: per-channel mean and std (fb.resnet.torch and most re-implementations).
    ``pixel``: per-pixel mean subtracted, std 1 ("the per-pixel mean subtracted", He et al. 2015 §4.2).
    """
    x = x_train.astype(np.float64)
    if mode == "channel":
        return x.mean(axis=(0, 1, 2)).astype(np.float32), x.std(axis=(0, 1, 2)).astype(np.float32)
    if mode == "pixel":
        return x.mean(axis=0).astype(np.float32), np.ones(x.shape[-1], np.float32)
    check_choice("normalize", mode, NORMALIZATIONS)
    raise AssertionError(f"normalization {mode!r} is listed but not implemented")


def normalize(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """uint8 images → float32 ``(x - mean) / std``."""
    return ((x.astype(np.float32) - mean) / std).astype(np.float32)


class BatchStream:
    """Endless shuffled, augmented, normalized training batches with a resumable position.

    Each epoch is a fresh permutation; a batch that crosses an epoch end is completed from the next one,
    so every batch has ``batch_size`` images. Augmentation (He et al. 2015 §4.2): zero-pad ``pad`` pixels
    on each side (after normalization, so the padding is the mean colour), take a random crop of the
    original size, mirror it with probability ½ when ``flip``.
    """

    def __init__(
        self, x: np.ndarray, y: np.ndarray, batch_size: int, mean: np.ndarray, std: np.ndarray,
        pad: int = 4, flip: bool = True, seed: int = 0,
    ) -> None:
        self.x, self.y = x, y
        self.batch_size, self.pad, self.flip = batch_size, pad, flip
        self.mean, self.std = mean, std
        self.rng = np.random.default_rng(seed)
        self.epoch = 0
        self.position = 0  # next index into self.order
        self.order = self.rng.permutation(len(y))

    def _take(self, n: int) -> np.ndarray:
        idx: list[np.ndarray] = []
        while n > 0:
            if self.position == len(self.order):
                self.order, self.position, self.epoch = self.rng.permutation(len(self.y)), 0, self.epoch + 1
            k = min(n, len(self.order) - self.position)
            idx.append(self.order[self.position:self.position + k])
            self.position, n = self.position + k, n - k
        return np.concatenate(idx)

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        """The next batch: float32 ``(B, H, W, C)`` normalized images and int32 labels."""
        idx = self._take(self.batch_size)
        xb = normalize(self.x[idx], self.mean, self.std)
        b, h, w, _ = xb.shape
        if self.pad:
            p = self.pad
            padded = np.pad(xb, ((0, 0), (p, p), (p, p), (0, 0)))
            offsets = self.rng.integers(0, 2 * p + 1, size=(b, 2))
            xb = np.stack([padded[i, dy:dy + h, dx:dx + w] for i, (dy, dx) in enumerate(offsets)])
        if self.flip:
            mirror = self.rng.random(b) < 0.5
            xb[mirror] = xb[mirror, :, ::-1]
        return xb, self.y[idx]

    @property
    def epochs_done(self) -> float:
        """Epochs consumed so far, fractional."""
        return self.epoch + self.position / len(self.y)

    def state(self) -> tuple[dict[str, Any], np.ndarray]:
        """(JSON-able state, permutation of the current epoch): all that :meth:`restore` needs."""
        state = {"epoch": self.epoch, "position": self.position, "rng": self.rng.bit_generator.state}
        return state, self.order

    def restore(self, state: dict[str, Any], order: np.ndarray) -> None:
        if len(order) != len(self.y):
            raise UsageError(f"checkpoint data order has {len(order)} images, this dataset {len(self.y)}")
        self.epoch, self.position, self.order = int(state["epoch"]), int(state["position"]), order
        self.rng.bit_generator.state = state["rng"]
