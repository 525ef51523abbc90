"""One look for every plot of the workbook: a colour per backend (the same in 02, 03 and the comparisons),
a hatch per mode, the verdict colours, and matplotlib defaults set once (:func:`apply`)."""

from __future__ import annotations

BACKEND_COLORS = {"tensorflow": "#4C72B0", "jax": "#DD8452", "torch": "#C44E52"}
OTHER_COLOR = "#8C8C8C"  # a row of no backend (the 2017 figures)
MODE_HATCH = {"train": "", "infer": "//"}
VERDICT_COLORS = {"faster": "#17692b", "slower": "#b00020", "no significant change": "#555555"}


def color(backend: str | None) -> str:
    return BACKEND_COLORS.get(backend or "tensorflow", OTHER_COLOR)


def apply() -> None:
    """matplotlib defaults every notebook shares: readable titles, light grid under the data, no top/right
    spines."""
    import matplotlib as mpl

    mpl.rcParams.update({
        "axes.titlesize": 11, "axes.labelsize": 9, "xtick.labelsize": 8, "ytick.labelsize": 8,
        "legend.fontsize": 8, "axes.grid": True, "grid.alpha": 0.3, "axes.axisbelow": True,
        "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": 100,
    })
