"""The one way the package runs work in a child process: ``python -m MODULE REQUESTS.json REPLIES.jsonl``.

Framework settings (oneDNN, XLA flags, thread pools, the Keras backend) are read once, at import, so every
benchmark configuration, HLO capture on another backend and XLA dump runs in a fresh interpreter.

Wire format. The parent writes ``REQUESTS.json``, a JSON list of requests. The child (:func:`serve`) answers
them in order: before each it prints ``@@resnet-lab-request I`` on stdout (:data:`REQUEST_MARK`, so the log
splits per request, :func:`split_log`), then appends one line to ``REPLIES.jsonl``: ``{"reply": ...}`` with
what the handler returned, or ``{"error": "Type: first line"}`` when it raised (the traceback goes to the
log). Files rather than a marked stdout line: frameworks write to the same descriptors from C++, and a reply
may be megabytes of HLO text. A line counts once it ends with its newline, so a half-written one is never
read. After the last reply the child leaves with ``os._exit(0)``: frameworks' atexit handlers (thread pools,
compile caches) can hang or crash at teardown.

Parent side. :class:`Child` starts the process now, in its own process group (a new session: Ctrl-C in a
terminal reaches the parent only, which decides), with stdout and stderr in one log file; its outcomes are
collected later (:meth:`Child.outcomes`, :meth:`Child.outcome`), each request within its timeout. On a
timeout, an error or KeyboardInterrupt the whole group is killed, grandchildren included; the group is swept
again when the child is closed. :func:`run` is the blocking call of one request. Each outcome says in one
place how the request ended (:class:`Outcome`: ``ok``, ``failed``, ``timeout``, ``killed``, ``exited``).
The child is a plain child of this process, so a parent that stops its descendants by walking ``/proc``
(the workbook runner on Ctrl-C) finds it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resnet_lab.core import provenance
from resnet_lab.core.text import one_line

REQUEST_MARK = "@@resnet-lab-request"  # a log line `@@resnet-lab-request I`: request I starts
POLL_S = 0.05
EXIT_GRACE_S = 60.0  # after its last reply, how long a child may take to leave before it is killed

OK, FAILED, TIMEOUT, KILLED, EXITED = "ok", "failed", "timeout", "killed", "exited"


# ------------------------------------------------------------------------------------------ child side
# What Keras (and TensorFlow) import whenever it is installed, inside ``try: ... except ImportError``, and a
# Keras child never calls: Keras' scikit-learn wrapper (sklearn with scipy, 0.5 s), its plotting and notebook
# helpers (matplotlib, IPython, 0.5 s), and outside a JAX child tf.lite's JAX converter and Keras' Orbax
# checkpoint callback (jax, 0.5 s). TensorFlow's 5.5 s of import becomes 3.3 s on 2 cores; tiny-resnet's import,
# build and one fit on Keras' JAX backend 7.25 s becomes 6.00 s, on its torch backend 4.65 s becomes 3.31 s.
UNUSED = {
    "tensorflow": ("jax", "sklearn", "matplotlib", "IPython"),
    "jax": ("sklearn", "matplotlib", "IPython"),
    "torch": ("jax", "sklearn", "matplotlib", "IPython"),
}


def skip_unused_imports(names: Sequence[str] | None = None) -> list[str]:
    """In a Keras child, make ``import NAME`` fail at once for ``names`` (None: :data:`UNUSED` of the child's
    ``KERAS_BACKEND``, TensorFlow where it is unset; a ``None`` in ``sys.modules`` is Python's own "not
    importable"), so the optional imports above cost nothing. Returns the names skipped; none where one is
    imported already."""
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    names = UNUSED.get(backend, ()) if names is None else names
    skipped = [n for n in names if n not in sys.modules]
    for name in skipped:
        sys.modules[name] = None  # type: ignore[assignment]
    return skipped


def serve(module: str, handler: Callable[[Any], Any], argv: list[str] | None = None) -> int:
    """The ``main`` of a child module: answer each request of ``argv[0]`` with ``handler`` into ``argv[1]``.

    Returns 2 with a usage line on stderr when the arguments are not two paths; otherwise it does not return
    (``os._exit(0)`` once every reply is written)."""
    argv = sys.argv[1:] if argv is None else argv
    if os.environ.get("KERAS_BACKEND"):  # a Keras child (an engine's worker has no Keras backend)
        skip_unused_imports()
    if len(argv) != 2:
        print(f"usage: python -m {module} REQUESTS.json REPLIES.jsonl", file=sys.stderr)
        return 2
    requests = json.loads(Path(argv[0]).read_text())
    with open(argv[1], "a") as out:
        for i, request in enumerate(requests):
            print(f"{REQUEST_MARK} {i}", flush=True)
            try:
                line = json.dumps({"reply": handler(request)})
            except Exception as exc:  # the parent says it in one line; the traceback stays in the log
                traceback.print_exc()
                line = json.dumps({"error": one_line(exc)})
            out.write(line + "\n")
            out.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ----------------------------------------------------------------------------------------- parent side
@dataclass
class Outcome:
    """How one request ended.

    ``status``: ``ok`` (``reply`` holds the handler's answer), ``failed`` (the handler raised: ``error`` is
    its ``Type: first line``), ``timeout`` (no reply within ``timeout_s``: the group was killed), ``killed``
    (the child died of a signal before replying), ``exited`` (it ended with ``returncode`` without replying).
    ``wall_s``: seconds since the previous reply (the first: since the start, the interpreter's start
    included). ``log``: this request's part of the child's log."""

    status: str
    reply: Any = None
    error: str = ""
    returncode: int | None = None
    timeout_s: float | None = None
    wall_s: float = 0.0
    log: str = ""

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def signum(self) -> int | None:
        """The signal that ended the child (``killed``), else None."""
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None

    def reason(self, who: str = "child") -> str:
        """One line saying why there is no reply, naming the child as ``who`` ("" when ok)."""
        if self.status == FAILED:
            return f"{who} failed: {self.error}"
        if self.status == TIMEOUT:
            return f"no result after {self.timeout_s:g} s ({who} killed)"
        if self.status == KILLED:
            sig = self.signum or 0
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            hint = " (out of memory?)" if sig == signal.SIGKILL else ""  # what the kernel's OOM killer sends
            return f"{who} killed by {name}{hint}: {log_tail(self.log)}"
        if self.status == EXITED:
            return f"{who} exited {self.returncode} without a result: {log_tail(self.log)}"
        return ""


def log_tail(text: str) -> str:
    """The line of a child's log that best says why it died: the last error-looking line, else the last."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for marker in ("Error", "error", "Illegal", "Check failed", "Killed"):
        hits = [ln for ln in lines if marker in ln]
        if hits:
            return hits[-1][:400]
    return (lines[-1] if lines else "(no output)")[:400]


def split_log(text: str) -> dict[int, str]:
    """A child's log cut at its :data:`REQUEST_MARK` lines: request index -> its part (what comes before
    the first mark, the interpreter's start, goes with request 0)."""
    parts: dict[int, list[str]] = {0: []}
    current = 0
    for line in text.splitlines(keepends=True):
        if line.startswith(REQUEST_MARK):
            with contextlib.suppress(IndexError, ValueError):
                current = int(line.split()[1])
            parts.setdefault(current, [])
            continue
        parts.setdefault(current, []).append(line)
    return {i: "".join(lines) for i, lines in parts.items()}


def kill_group(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and every process of its group (it leads its own session), and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        if proc.poll() is None:
            proc.kill()
    proc.wait()


def _end(proc: subprocess.Popen, tmp: tempfile.TemporaryDirectory) -> None:
    """What closing a child always does, also when it is garbage collected or the interpreter exits: no
    process of its group is left behind (an orphaned grandchild included), its temporary files go."""
    kill_group(proc)
    tmp.cleanup()


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (None: this process's) as a child gets it: this very package first on ``PYTHONPATH``, so the
    child imports the code that started it, and unbuffered output, so its log is in order."""
    out = dict(os.environ if env is None else env)
    root = str(provenance.package_root())
    rest = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    out["PYTHONPATH"] = os.pathsep.join([root, *rest])
    out["PYTHONUNBUFFERED"] = "1"
    return out


class Child:
    """``python -m MODULE`` started now on ``requests``; its :class:`Outcome` per request collected later.

    ``env``: the child's whole environment (None: this process's; see :func:`child_env`). ``log_path``: where
    its stdout and stderr go (kept); None: a temporary file. ``python``: the interpreter (this one by default).
    Use as a context manager, or call :meth:`close`: the group is killed there if it still runs."""

    def __init__(self, module: str, requests: Sequence[Any], *, env: Mapping[str, str] | None = None,
                 log_path: str | os.PathLike | None = None, python: str | None = None) -> None:
        self.module = module
        self.n_requests = len(requests)
        self._tmp = tempfile.TemporaryDirectory(prefix="resnet-lab-child-")
        tmp = Path(self._tmp.name)
        request_path, self._replies = tmp / "requests.json", tmp / "replies.jsonl"
        request_path.write_text(json.dumps(list(requests)))
        self._replies.touch()
        self.log_path = Path(log_path) if log_path else tmp / "child.log"
        self.command = [python or sys.executable, "-m", module, str(request_path), str(self._replies)]
        self._offset = 0  # bytes of the replies file read so far
        self._answered = 0
        self._t_last = time.perf_counter()
        try:
            with open(self.log_path, "w") as log:
                self.proc = subprocess.Popen(self.command, env=child_env(env), stdout=log,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True)
        except BaseException:
            self._tmp.cleanup()
            raise
        self._finalizer = weakref.finalize(self, _end, self.proc, self._tmp)

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def outcomes(self, timeout_s: float | Sequence[float]) -> Iterator[Outcome]:
        """Each request's outcome, in order, as it comes; after one that is not a reply (``timeout``,
        ``killed``, ``exited``) no more come. ``timeout_s``: one for every request, or one each; each counts
        from the previous reply, or from this call for the first. Kills the group on any exception, a
        KeyboardInterrupt included, and when the caller stops early."""
        timeouts = ([float(timeout_s)] * self.n_requests if isinstance(timeout_s, int | float)
                    else [float(t) for t in timeout_s])
        clock = time.perf_counter()
        try:
            while self._answered < self.n_requests:
                rc = self.proc.poll()  # before reading: every reply of a child that has left is on disk
                for line in self._new_lines():
                    yield self._reply_outcome(line)
                    clock = time.perf_counter()
                if self._answered == self.n_requests:
                    break
                if rc is not None:
                    yield self._failure(KILLED if rc < 0 else EXITED, returncode=rc)
                    return
                timeout = timeouts[self._answered]
                if time.perf_counter() - clock > timeout:
                    kill_group(self.proc)
                    yield self._failure(TIMEOUT, timeout_s=timeout)
                    return
                time.sleep(POLL_S)
        except BaseException as exc:  # KeyboardInterrupt, the caller's error, stopping early: nothing left behind
            if not isinstance(exc, GeneratorExit) or self._answered < self.n_requests:
                kill_group(self.proc)
            raise

    def outcome(self, timeout_s: float) -> Outcome:
        """The outcome of a child started on one request; the child is closed afterwards."""
        try:
            return next(iter(self.outcomes(timeout_s)))
        finally:
            self.close()

    def close(self) -> None:
        """Let a child that has answered everything leave (:data:`EXIT_GRACE_S`), kill it otherwise, sweep its
        group and remove the temporary files (``log_path`` stays where it was asked for)."""
        if self._answered == self.n_requests and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            except BaseException:
                self._finalizer()
                raise
        self._finalizer()

    def _new_lines(self) -> list[str]:
        with open(self._replies, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written is read next time
        self._offset += len(complete)
        return complete.decode().splitlines()

    def _log(self, index: int) -> str:
        return split_log(self.log_path.read_text(errors="replace")).get(index, "")

    def _reply_outcome(self, line: str) -> Outcome:
        index, now = self._answered, time.perf_counter()
        wall, self._t_last = now - self._t_last, now
        self._answered += 1
        try:
            envelope = json.loads(line)
        except ValueError as exc:
            envelope = {"error": f"unreadable reply: {one_line(exc)}"}
        if "reply" in envelope:
            return Outcome(OK, reply=envelope["reply"], wall_s=wall, log=self._log(index))
        return Outcome(FAILED, error=str(envelope.get("error")), wall_s=wall, log=self._log(index))

    def _failure(self, status: str, **how: Any) -> Outcome:
        return Outcome(status, wall_s=time.perf_counter() - self._t_last, log=self._log(self._answered), **how)


def run(module: str, request: Any, *, timeout_s: float, env: Mapping[str, str] | None = None,
        log_path: str | os.PathLike | None = None, python: str | None = None) -> Outcome:
    """``python -m MODULE`` on one request, waited for: its :class:`Outcome` (see :class:`Child`)."""
    return Child(module, [request], env=env, log_path=log_path, python=python).outcome(timeout_s)
