"""Run records and what is read across them: logic only (their Markdown, tables and plots are in
:mod:`resnet_lab.report`).

- :mod:`~resnet_lab.runs.record`: a run record read whole or not at all, and the kind of host it was
  measured on (:class:`~resnet_lab.runs.record.HostKind`); the committed record of each host kind.
- :mod:`~resnet_lab.runs.compare`: two records side by side (``resnet-lab compare``, notebook 05): op sets,
  speeds with their significance, environment.
- :mod:`~resnet_lab.runs.history`: the headline speeds over every record (``resnet-lab history``), one series
  per host kind, with their change points.

Nothing here imports pandas or matplotlib.
"""
