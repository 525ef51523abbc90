"""Every notebook's view: tables, plots and sentences written from measured rows, inventories and run records,
one module per notebook (03 has three).

- :mod:`~resnet_lab.report.ops`: op inventories (:mod:`resnet_lab.hlo`'s records) as DataFrames, heatmaps
  and text: notebook 02.
- :mod:`~resnet_lab.report.speed`: notebook 03's benchmark matrices (the 2017 rows today, sweeps, backends,
  the oneDNN profile), their tables, plots and the conclusion.
- :mod:`~resnet_lab.report.native`: notebook 03's TensorFlow vs native PyTorch rows and speed targets, and
  the MLPerf-style scenarios.
- :mod:`~resnet_lab.report.environment`: notebook 00's machine tables, GEMM bars and the limit MFU divides by.
- :mod:`~resnet_lab.report.selection`: notebook 01's facts tables, weighted contributions and ``selection.md``.
- :mod:`~resnet_lab.report.convergence`: notebook 04's recipe, published figures and comparison tables.
- :mod:`~resnet_lab.report.speed_results`: notebook 03's ``results.json``.
- :mod:`~resnet_lab.report.compare`: notebook 05's comparison (headline, Markdown, table, deltas plot) and
  ``resnet-lab compare``; :mod:`~resnet_lab.report.history`: the index's speed history and ``resnet-lab history``.

Each function takes measured records or rows and returns a DataFrame, a figure or Markdown, so the
notebooks narrate and the sentences can never disagree with the tables above them.
"""
