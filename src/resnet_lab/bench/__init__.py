"""How fast a model runs: one configuration per worker process, one tidy row per configuration.

From the bottom up (each module imports only those above it in this list):

- :mod:`~resnet_lab.bench.stats`, :mod:`~resnet_lab.bench.profile`, :mod:`~resnet_lab.bench.gemm`: step
  statistics, MFU and utilisation; the oneDNN verbose profile; the one GEMM timer.
- :mod:`~resnet_lab.bench.peak`: the machine's measured GEMM peak (``resnet-lab peak``, notebook 00).
- :mod:`~resnet_lab.bench.cluster`: multi-worker runs (``TF_CONFIG``, scaling efficiency, lost peers).
- :mod:`~resnet_lab.bench.config`: :class:`~resnet_lab.bench.config.BenchConfig`, its checks, sweeps.
- :mod:`~resnet_lab.bench.timing`: :class:`~resnet_lab.bench.timing.Timing`, the timing knobs every matrix shares.
- :mod:`~resnet_lab.bench.rows`: a worker's result as a row; CSV, JSON, tables.
- :mod:`~resnet_lab.bench.cluster_worker`, :mod:`~resnet_lab.bench.measure`: what runs *inside* a worker
  process (TensorFlow, JAX or PyTorch imported there); :mod:`~resnet_lab.bench.worker_child` is its
  entry point (``python -m``).
- :mod:`~resnet_lab.bench.launcher`: starts workers, one per configuration, and turns their ends into rows.
- :mod:`~resnet_lab.bench.local_cluster`: N workers on this host (``--local-workers``).
- :mod:`~resnet_lab.bench.presets`: the named matrices (``--preset``).
- :mod:`~resnet_lab.bench.analysis`: what notebook 03 shows (tables, plots, the conclusion).
- :mod:`~resnet_lab.bench.plan`, :mod:`~resnet_lab.bench.record`: what notebook 03 runs, from its parameters,
  and what it records in ``results.json``.
- :mod:`~resnet_lab.bench.cli`: ``resnet-lab bench``.

Importing any module outside the worker side is cheap: no framework is imported.
"""
