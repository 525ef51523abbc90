"""Datasets of the convergence check: CIFAR-10 pickles (a fake folder), digits, the batch stream."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from resnet_lab.convergence import datasets
from resnet_lab.core.errors import UsageError


def write_fake_cifar10(
    folder: Path, per_batch: int = 6, test: int = 4, str_keys: bool = False, protocol: int = 2
) -> Path:
    """A CIFAR-10 python-pickle folder with random images: the layout of cifar-10-batches-py."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name in datasets.CIFAR10_FILES:
        n = test if name == "test_batch" else per_batch
        d = {
            b"batch_label": name.encode(),
            b"labels": [int(v) for v in rng.integers(0, 10, n)],
            b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            b"filenames": [f"img_{i}.png".encode() for i in range(n)],
        }
        if str_keys:
            d = {k.decode(): v for k, v in d.items()}
        with (folder / name).open("wb") as f:
            pickle.dump(d, f, protocol=protocol)  # 2: what the original Python 2 files use
    return folder


def test_cifar_folder_loads_channels_last(tmp_path: Path) -> None:
    folder = write_fake_cifar10(tmp_path / "cifar-10-batches-py")
    ds = datasets.load("cifar10", data_dir=str(folder))
    assert ds.x_train.shape == (30, 32, 32, 3) and ds.x_train.dtype == np.uint8
    assert ds.x_test.shape == (4, 32, 32, 3) and ds.y_test.dtype == np.int32
    with (folder / "data_batch_2").open("rb") as f:
        raw = pickle.load(f, encoding="bytes")
    row = raw[b"data"][1]  # image 1 of batch 2 = training image 7: R, G, B planes of 32×32
    for c in range(3):
        np.testing.assert_array_equal(ds.x_train[7, :, :, c], row[c * 1024:(c + 1) * 1024].reshape(32, 32))
    assert ds.y_train[7] == raw[b"labels"][1]
    assert ds.classes[0] == "airplane" and ds.num_classes == 10
    assert ds.summary()["train_images"] == 30


def test_cifar_parent_folder_and_str_keys(tmp_path: Path) -> None:
    write_fake_cifar10(tmp_path / "cifar-10-batches-py", str_keys=True, protocol=pickle.HIGHEST_PROTOCOL)
    assert datasets.find_cifar10(tmp_path) == tmp_path / "cifar-10-batches-py"
    assert len(datasets.load("cifar10", data_dir=str(tmp_path)).y_train) == 30


def test_cifar_missing_folder_or_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"does not exist.*cifar-10-python.tar.gz"):
        datasets.check_available("cifar10", data_dir=str(tmp_path / "nowhere"))
    folder = write_fake_cifar10(tmp_path / "c")
    (folder / "test_batch").unlink()
    with pytest.raises(UsageError, match=r"lacks test_batch.*--data-dir"):
        datasets.load("cifar10", data_dir=str(folder))


def test_cifar_not_cached_and_no_download_is_a_usage_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    assert datasets.find_cifar10("") is None
    with pytest.raises(UsageError, match=r"not found in .*downloading is off"):
        datasets.check_available("cifar10", download=False)


def test_cifar_download_failure_is_a_usage_error(tmp_path: Path, monkeypatch) -> None:
    """No local copy and no network: Keras' loader fails, we say how to provide the data."""
    import urllib.error

    import keras

    def offline() -> None:
        raise urllib.error.URLError("offline")

    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setattr(keras.datasets.cifar10, "load_data", offline)
    with pytest.raises(UsageError, match=r"download failed.*data_dir"):
        datasets.load("cifar10")


def test_cifar_keras_cache_is_found(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    write_fake_cifar10(tmp_path / "datasets" / "cifar-10-batches-py-target" / "cifar-10-batches-py")
    assert "cifar-10-batches-py" in datasets.check_available("cifar10", download=False)


def test_cifar_pickle_with_code_is_refused(tmp_path: Path) -> None:
    folder = write_fake_cifar10(tmp_path / "c")
    with (folder / "data_batch_1").open("wb") as f:
        pickle.dump({b"data": os.getcwd, b"labels": []}, f, protocol=2)  # a global outside NumPy
    with pytest.raises(UsageError, match="not a CIFAR-10 python batch"):
        datasets.load_cifar10_dir(folder)


def test_unknown_dataset_and_digits_data_dir() -> None:
    with pytest.raises(UsageError, match="data: 'imagenet' is not one of: cifar10, digits"):
        datasets.check_available("imagenet")
    with pytest.raises(UsageError, match="CIFAR-10 only"):
        datasets.check_available("digits", data_dir="/tmp")


def test_digits_are_32x32_rgb_stratified() -> None:
    ds = datasets.load("digits")
    assert ds.x_train.shape == (1437, 32, 32, 3) and ds.x_test.shape == (360, 32, 32, 3)
    assert ds.x_train.dtype == np.uint8 and ds.x_train.max() == 255
    img = ds.x_train[0, :, :, 0]
    np.testing.assert_array_equal(img, np.repeat(np.repeat(img[::4, ::4], 4, 0), 4, 1))  # ×4 blocks
    np.testing.assert_array_equal(ds.x_train[..., 0], ds.x_train[..., 2])  # grey in all channels
    assert set(np.bincount(ds.y_test)) <= {35, 36, 37}  # stratified: ~36 of each digit


def test_normalization_modes() -> None:
    x = np.random.default_rng(0).integers(0, 256, (50, 32, 32, 3), dtype=np.uint8)
    mean, std = datasets.normalization(x, "channel")
    z = datasets.normalize(x, mean, std)
    np.testing.assert_allclose(z.mean(axis=(0, 1, 2)), 0, atol=1e-4)
    np.testing.assert_allclose(z.std(axis=(0, 1, 2)), 1, atol=1e-3)
    mean, std = datasets.normalization(x, "pixel")
    assert mean.shape == (32, 32, 3)
    np.testing.assert_allclose(datasets.normalize(x, mean, std).mean(axis=0), 0, atol=1e-3)
    with pytest.raises(UsageError):
        datasets.normalization(x, "zca")


def _stream(x: np.ndarray, y: np.ndarray, **kw) -> datasets.BatchStream:
    return datasets.BatchStream(x, y, 4, np.zeros(3, np.float32), np.ones(3, np.float32), **kw)


def test_stream_epochs_cover_every_image_once() -> None:
    x = np.arange(10, dtype=np.uint8)[:, None, None, None] * np.ones((1, 2, 2, 3), np.uint8)
    y = np.arange(10, dtype=np.int32)
    s = _stream(x, y, pad=0, flip=False)
    labels = np.concatenate([s.next()[1] for _ in range(5)])  # 20 = two epochs, batch 3 spans the seam
    assert sorted(labels[:10]) == list(range(10)) and sorted(labels[10:]) == list(range(10))
    assert s.epoch == 1 and s.epochs_done == 2.0
    xb, yb = _stream(x, y, pad=0, flip=False).next()
    np.testing.assert_array_equal(xb[:, 0, 0, 0], yb)  # no augmentation: images unchanged


def test_stream_augmentation_is_a_shifted_and_mirrored_window() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (8, 32, 32, 3), dtype=np.uint8)
    y = np.arange(8, dtype=np.int32)
    xb, yb = _stream(x, y, pad=4, flip=True).next()
    assert xb.shape == (4, 32, 32, 3) and xb.dtype == np.float32
    for img, label in zip(xb, yb, strict=True):
        padded = np.pad(x[label].astype(np.float32), ((4, 4), (4, 4), (0, 0)))
        windows = [padded[dy:dy + 32, dx:dx + 32] for dy in range(9) for dx in range(9)]
        assert any(np.array_equal(img, w) or np.array_equal(img, w[:, ::-1]) for w in windows)


def test_stream_state_restores_exactly() -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8)
    y = np.arange(10, dtype=np.int32)
    a = _stream(x, y, seed=5)
    for _ in range(4):
        a.next()
    state, order = a.state()
    b = _stream(x, y, seed=99)
    b.restore(state, order.copy())
    for _ in range(6):  # across the next epoch boundary too
        (xa, ya), (xb, yb) = a.next(), b.next()
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
