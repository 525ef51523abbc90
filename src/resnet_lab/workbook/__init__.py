"""The top of the house: what runs many parts of the package and writes a run folder.

- :mod:`~resnet_lab.workbook.runner`: ``resnet-lab run PARAMS.yaml``: checks a params file against the
  notebooks' parameters cells, executes each notebook with papermill into a new run folder, writes
  ``provenance.json`` and ``outputs/index.html``.
- :mod:`~resnet_lab.workbook.gpu_run`: ``resnet-lab gpu-run``: the one prepared script for a lent GPU.
"""
