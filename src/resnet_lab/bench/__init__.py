"""How fast one configuration runs: one configuration per worker process, one tidy row per configuration.

From the bottom up (each module imports only those above it in this list):

- :mod:`~resnet_lab.bench.schema`: a row's fields: name, type, unit, CSV or JSON only, per process, meaning.
- :mod:`~resnet_lab.bench.stats`: step statistics, confidence intervals, MFU and utilisation.
- :mod:`~resnet_lab.bench.identity`: what a row is: the knobs that define a measurement, its one name,
  whether it has a speed, rows read back from CSV or JSON as typed values.
- :mod:`~resnet_lab.bench.timing`: :class:`~resnet_lab.bench.timing.Timing`, the timing knobs and their one
  default (``DEFAULT``), which the configuration, the CLI and notebook 03 read.
- :mod:`~resnet_lab.bench.config`: :class:`~resnet_lab.bench.config.BenchConfig`, its checks, sweeps.
- :mod:`~resnet_lab.bench.rows`: a worker's result as a row; CSV, JSON, tables.
- :mod:`~resnet_lab.bench.measure`: what runs *inside* a worker process (TensorFlow, JAX or PyTorch
  imported there); :mod:`~resnet_lab.bench.worker_child` is its entry point (``python -m``).
- :mod:`~resnet_lab.bench.launcher`: starts workers, one per configuration, and turns their ends into rows;
  the one interleaved-rounds loop (``run_rounds``, with a budget) and a matrix run as a straight line
  (``run_matrix``: validate, plan, run, rows).
- :mod:`~resnet_lab.bench.local_cluster`: N workers on this host (``--local-workers``), each a launcher run.
- :mod:`~resnet_lab.bench.presets`: the named matrices (``--preset``).
- :mod:`~resnet_lab.bench.plan`: what notebook 03 runs: every section's configurations, from its parameters.
- :mod:`~resnet_lab.bench.cli`: ``resnet-lab bench``.

What this package builds on: the machine's ceilings (:mod:`resnet_lab.ceilings`: GEMM timer and peak, the
oneDNN profile) and what a run across workers adds (:mod:`resnet_lab.scaleout`). What reads its rows:
the notebooks' report layer (:mod:`resnet_lab.report`) and ``resnet-lab compare``.

Importing any module outside the worker side is cheap: no framework is imported.
"""
