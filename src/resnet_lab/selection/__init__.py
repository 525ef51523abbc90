"""Notebook 01's decision: which ResNet implementation is the reference workload.

- :mod:`~resnet_lab.selection.criteria`: the candidates (``data/candidates.yaml``), the criteria and their
  weights, the scores, the ranking and its sensitivity to each weight.
- :mod:`~resnet_lab.selection.measure`: each candidate's model measured on this host (HLO opcodes, a short
  benchmark) and the rows it came from.
- :mod:`~resnet_lab.selection.decision`: the winner with its definition and the reasons (``selection.json``),
  and what notebook 01 records in ``results.json``.

Its tables, plot and Markdown: :mod:`resnet_lab.report.selection`.
"""
