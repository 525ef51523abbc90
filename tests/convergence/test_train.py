"""The training recipe, checkpoint/resume, the published figures, the verdict and the `train` command."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_usage_error

from resnet_lab import models
from resnet_lab.convergence import train
from resnet_lab.core.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
PAPER = train.TrainConfig()
# The smallest run that still exercises everything: a few steps of ResNet-20 on digits.
TINY = train.TrainConfig(model="cifar_resnet20", data="digits", steps=8, batch_size=16, log_every=2,
                         eval_every=4, checkpoint_every=2, eval_batch_size=360)


# ---------------------------------------------------------------------------------------- recipe
def test_paper_schedule() -> None:
    assert train.lr_boundaries(PAPER) == [32_000, 48_000]
    assert [train.lr_at(s, PAPER) for s in (0, 31_999, 32_000, 47_999, 48_000, 63_999)] == pytest.approx(
        [0.1, 0.1, 0.01, 0.01, 0.001, 0.001])
    assert train.warmup_steps(PAPER) == 0  # ResNet-56: no warm-up


@pytest.mark.parametrize("model", ["cifar_resnet110", "cifar_resnet164_v2", "cifar_resnet1001_v2"])
def test_published_warmup(model: str) -> None:
    cfg = dataclasses.replace(PAPER, model=model)
    assert train.warmup_steps(cfg) == 400
    assert train.lr_at(399, cfg) == 0.01 and train.lr_at(400, cfg) == 0.1
    assert train.warmup_steps(dataclasses.replace(cfg, warmup_steps=0)) == 0


def test_short_run_keeps_the_schedule_shape() -> None:
    assert train.lr_boundaries(dataclasses.replace(PAPER, steps=200)) == [100, 150]


@pytest.mark.parametrize("change", [dict(steps=0), dict(lr=0.0), dict(lr_decay_at=(0.75, 0.5)),
                                    dict(momentum=1.0), dict(normalize="zca"), dict(model="resnet9000"),
                                    dict(model="resnet50"), dict(data="imagenet")])
def test_bad_config_is_a_usage_error(change: dict) -> None:
    with pytest.raises(UsageError):
        train.validate(dataclasses.replace(TINY, **change))


def test_config_from_notebook_params() -> None:
    params = {"model": "cifar_resnet20", "lr_decay_at": [0.4, 0.8], "resume": True}
    cfg = train.TrainConfig.from_params(params)
    assert cfg.lr_decay_at == (0.4, 0.8) and cfg.model == "cifar_resnet20"
    assert cfg.to_dict()["lr_decay_at"] == [0.4, 0.8]


def test_weight_decay_hits_every_conv_and_dense_kernel_only() -> None:
    import keras



    model = models.build("cifar_resnet20")
    kernels = [v for v in model.trainable_variables if train.is_decayed(v)]
    layers = [la for la in model.layers if isinstance(la, keras.layers.Conv2D | keras.layers.Dense)]
    assert len(kernels) == len(layers) == 20  # 19 convs (option-A shortcuts have none) + the classifier
    assert sum(int(np.prod(v.shape)) for v in kernels) > 0.98 * model.count_params()


# ------------------------------------------------------------------------------ published, verdict
def test_published_figures() -> None:
    assert train.published("cifar_resnet56")["accuracy"] == pytest.approx(0.9303)
    assert train.published("cifar_resnet110_v2")["accuracy"] == pytest.approx(0.9363)
    assert train.published("cifar_resnet164_v2")["accuracy"] == pytest.approx(0.9454)
    assert train.published("cifar_resnet1001_v2")["accuracy"] == pytest.approx(0.9508)
    v2_32 = train.published("cifar_resnet32_v2")  # not in He et al. 2016: the TF models repo's figure
    assert v2_32["accuracy"] == pytest.approx(0.925) and "tensorflow/models" in v2_32["source"]
    assert "1512.03385" in train.published("cifar_resnet20")["source"]


def test_published_names_are_model_names() -> None:
    for name in train.published_doc()["models"]:
        models.get_spec(name)  # raises for a name the model zoo does not know


def test_verdicts() -> None:
    v = train.verdict(PAPER, 0.9290, 64_000)
    assert v["status"] == "reproduced" and v["delta_pp"] == pytest.approx(-0.13)
    assert train.verdict(PAPER, 0.9200, 64_000)["status"] == "below published"
    v = train.verdict(PAPER, 0.9300, 1000)
    assert v["status"] == "not comparable" and "stopped at step 1000" in v["text"]
    v = train.verdict(dataclasses.replace(PAPER, flip=False), 0.93, 64_000)
    assert v["status"] == "not comparable" and "flip=False" in v["text"]
    v = train.verdict(TINY, 0.97, 8)
    assert v["status"] == "no published figure" and "digits" in v["text"] and v["published_accuracy"] is None
    v = train.verdict(dataclasses.replace(PAPER, model="cifar_resnet32_v2"), 0.90, 64_000)
    assert v["status"] == "below published" and v["published_accuracy"] == pytest.approx(0.925)
    assert train.verdict(PAPER, None, 0)["status"] == "no result"


# --------------------------------------------------------------------------------- train and resume
def _checkpoint_arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files if k != "meta"}


@pytest.mark.slow
def test_interrupted_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    """Train 8 steps straight; train 4, stop, resume to 8: same step count, optimizer state, history."""
    straight = train.train(TINY, tmp_path / "straight", verbose=False)
    assert straight.finished and straight.step == straight.optimizer_iterations == 8

    first = train.train(TINY, tmp_path / "resumed", stop_at=4, verbose=False)
    assert (first.step, first.finished, first.optimizer_iterations) == (4, False, 4)
    assert [s for s, _ in train.list_checkpoints(tmp_path / "resumed")] == [2, 4]
    # a row written after the last checkpoint, then a crash: resuming must redo it, not keep it
    with (tmp_path / "resumed" / train.HISTORY_FILE).open("a") as f:
        f.write("5,0.1,0.1,9.9,0.9,,,1.0\n")
    with pytest.raises(UsageError, match="holds checkpoints"):
        train.train(TINY, tmp_path / "resumed", verbose=False)  # not resuming: refused, nothing touched
    with pytest.raises(UsageError, match=r"different recipe.*lr"):
        train.train(dataclasses.replace(TINY, lr=0.05), tmp_path / "resumed", resume=True, verbose=False)

    second = train.train(TINY, tmp_path / "resumed", resume=True, verbose=False)
    assert second.resumed_from == 4
    assert (second.step, second.finished, second.optimizer_iterations) == (8, True, 8)

    h_straight = train.read_history(tmp_path / "straight")
    h_resumed = train.read_history(tmp_path / "resumed")
    assert list(h_resumed["step"]) == list(h_straight["step"]) == [2, 4, 6, 8]
    np.testing.assert_allclose(h_resumed["train_loss"], h_straight["train_loss"], rtol=1e-4)
    np.testing.assert_allclose(h_resumed["epoch"], h_straight["epoch"])
    np.testing.assert_allclose(h_resumed["test_error"].dropna(), h_straight["test_error"].dropna(), atol=1e-9)
    assert h_resumed["wall_s"].is_monotonic_increasing
    assert second.test_accuracy == pytest.approx(straight.test_accuracy, abs=1e-9)

    a = _checkpoint_arrays(straight.checkpoint)
    b = _checkpoint_arrays(second.checkpoint)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-6, err_msg=k)
    meta = train.read_checkpoint_meta(second.checkpoint)
    assert meta["step"] == 8 and meta["config"]["model"] == "cifar_resnet20"


@pytest.mark.slow
def test_resume_across_run_folders_through_checkpoint_dir(tmp_path: Path, monkeypatch) -> None:
    """The batch runner gives every rerun a new output folder: a pinned checkpoint_dir carries the run."""
    monkeypatch.setenv("RESNET_LAB_OUTPUTS", str(tmp_path / "outputs"))
    cfg = dataclasses.replace(TINY, steps=4)
    first = train.train(cfg, tmp_path / "run1", stop_at=2, checkpoint_dir="checkpoints/tiny", verbose=False)
    state = tmp_path / "outputs" / "checkpoints" / "tiny"  # relative: under the outputs root
    assert first.checkpoint.parent == state / train.CHECKPOINT_DIR and (state / train.HISTORY_FILE).exists()
    assert list(train.read_history(tmp_path / "run1")["step"]) == [2]  # copied to the run folder
    second = train.train(cfg, tmp_path / "run2", resume=True, checkpoint_dir=str(state), verbose=False)
    assert (second.resumed_from, second.step, second.optimizer_iterations) == (2, 4, 4)
    assert list(train.read_history(tmp_path / "run2")["step"]) == [2, 4]  # the whole run, both sessions
    assert not (tmp_path / "run2" / train.CHECKPOINT_DIR).exists()


@pytest.mark.slow
def test_cifar10_path_end_to_end_on_a_fake_folder(tmp_path: Path) -> None:
    from test_datasets import write_fake_cifar10

    folder = write_fake_cifar10(tmp_path / "cifar-10-batches-py", per_batch=8, test=8)
    cfg = dataclasses.replace(TINY, data="cifar10", data_dir=str(folder), steps=2, batch_size=8)
    result = train.train(cfg, tmp_path / "out", verbose=False)
    assert result.finished and result.data["train_images"] == 40 and result.data["source"] == str(folder)
    v = train.verdict(cfg, result.test_accuracy, result.step)
    assert v["status"] == "not comparable" and v["published_accuracy"] == pytest.approx(0.9125)


# ----------------------------------------------------------------------------------------------- CLI
def _cli(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    train.add_arguments(p)
    return p.parse_args(argv)


@pytest.mark.parametrize("argv, message", [
    (["--data", "cifar10", "--data-dir", "{tmp}/no-cifar"], "does not exist"),
    (["--model", "resnet9000"], "model: 'resnet9000' is not one of: resnet18, "),
    (["--model", "resnet50"], "resnet50 is not a CIFAR ResNet; train takes one of: cifar_resnet20, "),
    (["--data", "digits", "--resume"], "--out"),
    (["--data", "digits", "--steps", "0"], "steps: 0 is not an integer >= 1"),
])
def test_cli_errors_come_before_tensorflow(tmp_path: Path, argv: list[str], message: str) -> None:
    r = assert_usage_error(["train", *[a.format(tmp=tmp_path) for a in argv]], message, cwd=tmp_path)
    if "does not exist" in message:
        assert "cifar-10-python.tar.gz" in r.stderr


def test_cli_failed_download_leaves_no_run_folder(tmp_path: Path, monkeypatch) -> None:
    import urllib.error

    import keras

    def offline() -> None:
        raise urllib.error.URLError("offline")

    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setattr(keras.datasets.cifar10, "load_data", offline)
    with pytest.raises(UsageError, match="download failed"):
        train.run(_cli(["--data", "cifar10", "--out", str(tmp_path / "run")]))
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_cli_train_digits(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    args = _cli(["--model", "cifar_resnet20", "--data", "digits", "--steps", "3", "--batch-size", "16",
                 "--eval-every", "3", "--out", str(out)])
    assert train.run(args) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] == 3 and results["verdict"] == "no published figure"
    assert 0.0 <= results["test_accuracy"] <= 1.0 and results["published_accuracy"] is None
    assert (out / "learning_curves.png").stat().st_size > 0 and (out / "provenance.json").exists()
    assert "no published figure exists" in capsys.readouterr().out
