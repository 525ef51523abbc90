"""What a run across workers adds to one configuration (``tf.distribute.MultiWorkerMirroredStrategy``).

- :mod:`~resnet_lab.scaleout.cluster`: the cluster as fields of a configuration (their checks, ``TF_CONFIG``),
  the multi-worker row fields (global and per-worker images/sec, scaling efficiency), lost-peer errors.
- :mod:`~resnet_lab.scaleout.cluster_worker`: the worker process's side (TensorFlow): the strategy, a
  watchdog, the timed-region barrier and the gather of every worker's step times.

The benchmark layer (:mod:`resnet_lab.bench`) sits above: its configuration carries the cluster fields and
checks them here, its launcher sets ``TF_CONFIG``, its worker joins the cluster, its rows take the fields;
N workers on one host are its :mod:`~resnet_lab.bench.local_cluster`. Nothing here imports the benchmark.
"""
