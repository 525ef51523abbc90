"""Notebook 04's view: the recipe beside the paper's, the published figures, and this run against them, as tables.

Training, the published figures and the verdict: :mod:`resnet_lab.convergence.train` (with the learning
curves' figure, which ``resnet-lab train`` saves too).
"""

from __future__ import annotations

from typing import Any

from resnet_lab.convergence.train import (
    RECIPE_FIELDS,
    TrainConfig,
    TrainResult,
    lr_boundaries,
    published_doc,
    verdict,
    warmup_steps,
)


def published_table() -> Any:
    """Every model of the data file, published or not: a DataFrame for the notebook."""
    import pandas as pd

    doc = published_doc()
    rows = []
    for name, e in doc["models"].items():
        err = e.get("error_pct")
        rows.append({"model": name, "published_accuracy_pct": None if err is None else round(100 - err, 2),
                     "error_pct": err, "mean_error_pct": e.get("mean_pct"), "std_error_pct": e.get("std_pct"),
                     "source": e["source"], "note": e.get("note", "")})
    return pd.DataFrame(rows)


def recipe_table(cfg: TrainConfig) -> Any:
    """This run's recipe beside the paper's, one row per setting (a DataFrame for the notebook)."""
    import pandas as pd

    paper = TrainConfig(model=cfg.model)
    rows = [{"setting": "data", "this run": cfg.data, "paper": "cifar10"}]
    rows += [{"setting": k, "this run": getattr(cfg, k), "paper": getattr(paper, k)} for k in RECIPE_FIELDS]
    rows += [
        {"setting": "lr drops at step", "this run": lr_boundaries(cfg), "paper": lr_boundaries(paper)},
        {"setting": "warm-up steps", "this run": warmup_steps(cfg), "paper": warmup_steps(paper)},
        {"setting": "warm-up lr", "this run": cfg.warmup_lr, "paper": paper.warmup_lr},
        {"setting": "normalize", "this run": cfg.normalize, "paper": "pixel",
         "note": "per-pixel mean in §4.2; not held against the verdict"},
    ]
    df = pd.DataFrame(rows).astype({"this run": str, "paper": str}).fillna({"note": ""})
    df.insert(3, "same", df["this run"] == df["paper"])
    return df


def comparison_table(result: TrainResult, tolerance_pp: float = 0.5) -> Any:
    """One-row DataFrame: our test accuracy beside the published one, and the verdict."""
    import pandas as pd

    v = verdict(result.config, result.test_accuracy, result.step, tolerance_pp)

    def pct(a: float | None) -> float | None:
        return None if a is None else round(100 * a, 2)

    return pd.DataFrame([{
        "model": result.config.model, "data": result.config.data, "steps": result.step,
        "test_accuracy_pct": pct(result.test_accuracy),
        "published_accuracy_pct": pct(v["published_accuracy"]),
        "delta_pp": v["delta_pp"], "status": v["status"], "source": v["published_source"],
    }])
