"""The worker's side of a multi-worker run: the strategy, a watchdog, the timed-region barrier and gather.

Runs inside the benchmark worker process (:mod:`resnet_lab.bench.measure`), with ``TF_CONFIG`` set by the
parent; see :mod:`resnet_lab.scaleout.cluster` for how the cluster works.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from typing import Any

from resnet_lab.scaleout.cluster import (
    FAULT_ENV,
    WATCHDOG_EXIT,
    ClusterConfig,
    PeerLostError,
    collective_used,
    combine_measurements,
    describe_peer_error,
    is_peer_error,
)


class Worker:
    """This process's part of the cluster: the strategy, a watchdog, the timed-region barrier and gather."""

    def __init__(self, cfg: ClusterConfig):
        self.cfg = cfg
        self.index, self.n = int(cfg.task_index), len(cfg.workers)
        self.strategy = None
        self.calls = 0
        self.busy_since: float | None = None
        self.armed = False
        self.what = ""
        task, _, call = os.environ.get(FAULT_ENV, "").partition(":")
        self.die_at = int(call) if task.isdigit() and call.isdigit() and int(task) == self.index else None
        self._stop = threading.Event()

    def configure(self) -> dict[str, Any]:
        """Devices and the cluster, before TensorFlow's context exists: facts for ``measure.setup_tensorflow``.

        One device per worker: the CPU, or one GPU (worker i takes GPU i mod the GPUs it sees, so local
        workers on a multi-GPU host get different ones). Returns ``{"devices", "multiworker"}`` or a skip.
        """
        import tensorflow as tf

        if self.cfg.device == "cpu":
            with contextlib.suppress(ValueError, RuntimeError):
                tf.config.set_visible_devices([], "GPU")
        else:
            gpus = tf.config.list_physical_devices("GPU")
            if not gpus:
                return {"skip": f"worker {self.index}: TensorFlow sees no GPU "
                                f"(built with CUDA: {tf.test.is_built_with_cuda()})"}
            gpu = gpus[self.index % len(gpus)]
            tf.config.set_visible_devices([gpu], "GPU")
            tf.config.experimental.set_memory_growth(gpu, True)
        self.join()
        return {"devices": self.devices, "multiworker": self}

    def join(self):
        """Configure the coordination service, create the strategy (waits for every peer), start the watchdog."""
        import tensorflow as tf
        from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
        from tensorflow.python.eager import context

        ms = int(self.cfg.peer_timeout_s * 1000)
        # What MultiWorkerMirroredStrategy configures by itself, plus our timeouts: register within the peer
        # timeout (a barrier: every worker or none goes on) and a heartbeat timeout of the same length.
        context.context().configure_coordination_service(
            service_type="standalone", service_leader="/job:worker/replica:0/task:0",
            cluster_register_timeout_in_ms=ms, heartbeat_timeout_in_ms=ms, shutdown_barrier_timeout_in_ms=ms,
            coordinated_jobs=[coordination_config_pb2.CoordinatedJob(name="worker", num_tasks=self.n)])
        context.context().coordination_service.cluster_register_with_barrier = True
        impl = tf.distribute.experimental.CommunicationImplementation[self.cfg.collective.upper()]
        options = tf.distribute.experimental.CommunicationOptions(implementation=impl)
        try:
            self.strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        except Exception as exc:
            if is_peer_error(exc):
                raise PeerLostError(describe_peer_error(self.cfg, exc, joining=True)) from exc
            raise
        print(f"resnet-lab multi-worker: worker {self.index} of {self.n} joined; replicas in sync: "
              f"{self.strategy.num_replicas_in_sync}; collective {collective_used(self.cfg)}", flush=True)
        self.start_watchdog()
        return self.strategy

    def start_watchdog(self) -> None:
        threading.Thread(target=self._watch, name="resnet-lab-watchdog", daemon=True).start()

    @property
    def devices(self) -> list[str]:
        return list(self.strategy.extended.worker_devices)

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            since = self.busy_since
            if self.armed and since is not None and time.monotonic() - since > self.cfg.peer_timeout_s:
                print(f"PeerLostError: worker {self.index} of {self.n} ({self.cfg.workers[self.index]}): "
                      f"{self.what} blocked for more than {self.cfg.peer_timeout_s:g} s: a peer worker is dead, "
                      f"stuck or unreachable; stopping", file=sys.stderr, flush=True)
                os._exit(WATCHDOG_EXIT)

    def guard(self, fn, what: str = "step", count: bool = False):
        """``fn`` under the watchdog (armed after the first, compiling, call), with peer errors explained."""

        def guarded(*args):
            if count:
                self.calls += 1
                if self.die_at is not None and self.calls == self.die_at:
                    print(f"resnet-lab multi-worker: {FAULT_ENV}: worker {self.index} dies at call "
                          f"{self.calls}", flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
            self.what = f"{what} {self.calls}" if count else what
            self.busy_since = time.monotonic()
            try:
                return fn(*args)
            except Exception as exc:
                if is_peer_error(exc):
                    raise PeerLostError(describe_peer_error(self.cfg, exc)) from exc
                raise
            finally:
                self.busy_since = None
                if count and self.calls >= 1:
                    self.armed = True

        return guarded

    def _all_gather(self, vec: list[float]):
        import tensorflow as tf

        value = self.strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant([vec], dtype=tf.float64))
        return self.strategy.gather(value, axis=0).numpy().tolist()

    def barrier(self) -> None:
        """Every worker reaches this point before any goes on (the start of the timed steps)."""
        self.guard(lambda: self._all_gather([float(self.index)]), "barrier before the timed steps")()

    def farewell(self) -> None:
        """One last all-gather after the step times, so that no worker leaves (its process ending closes its end of
        the ring) while a peer is still inside the gather: on a loaded host worker 0 used to exit first and worker 1
        lost it there ("Collective ops is aborted by: Socket closed"). A peer lost during this one had already given
        every step time, so it does not fail the row; a stuck one still meets the watchdog."""
        with contextlib.suppress(PeerLostError):
            self.guard(lambda: self._all_gather([float(self.index)]), "the last barrier, after the gather")()

    def gather(self, timed: dict[str, Any], first_step_s: float) -> dict[str, Any]:
        """Every worker's measurements, on every worker (one all-gather); result fields for the row."""
        cfg = self.cfg
        b = cfg.baseline_images_per_sec
        host_util = timed.get("host_util")
        vec = [float(self.index), float(timed["timed_s"]), float(timed["cpu_seconds"]),
               -1.0 if host_util is None else float(host_util), float(first_step_s),
               -1.0 if b is None else float(b), *map(float, timed["step_times"])]
        rows = self.guard(lambda: self._all_gather(vec), "gathering the workers' step times")()
        self.farewell()
        self._stop.set()
        mine = {"own_step_times": list(timed["step_times"]), "own_timed_s": timed["timed_s"]}
        return {**timed, **mine, **combine_measurements(cfg, rows), "collective": collective_used(cfg),
                "task_index": self.index}
