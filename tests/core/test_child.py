"""The one way a child process is started (:mod:`resnet_lab.core.child`), with a tiny child module and no
framework: replies, failures, timeouts, deaths and interrupts, and no process of the group left behind."""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from resnet_lab.core import child

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc are Linux's")

TINY = '''
import os, signal, subprocess, sys, time
from pathlib import Path
from resnet_lab.core import child

def handle(request):
    do = request["do"]
    print("handling", do, flush=True)
    if do == "echo":
        return {"echo": request["value"], "pid": os.getpid()}
    if do == "raise":
        raise ValueError("bad value\\nsecond line")
    if do == "unserializable":
        return {"x": object()}
    if do == "sleep":  # with a grandchild in the same group, which outlives this process unless killed
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        Path(request["pids"]).write_text(f"{os.getpid()} {grandchild.pid}")
        time.sleep(120)
    if do == "exit":
        print("RuntimeError: giving up", file=sys.stderr, flush=True)
        os._exit(3)
    if do == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)

if __name__ == "__main__":
    sys.exit(child.serve("tinychild", handle))
'''


@pytest.fixture
def env(tmp_path):
    (tmp_path / "tinychild.py").write_text(TINY)
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


def _gone(pid: int) -> bool:
    """No such process, or a zombie (killed; its reaper may be slow, or none in a container)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _wait_gone(pids: list[int], within: float = 10.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if all(_gone(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _pids(path: Path, within: float = 30.0) -> list[int]:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if path.exists() and len(path.read_text().split()) == 2:
            return [int(p) for p in path.read_text().split()]
        time.sleep(0.05)
    raise AssertionError("the child did not start its grandchild")


def test_reply_round_trips(env, tmp_path):
    log = tmp_path / "child.log"
    out = child.run("tinychild", {"do": "echo", "value": [1, "two", {"3": None}]}, timeout_s=60, env=env,
                    log_path=log)
    assert out.status == "ok" and out.ok and out.reason() == ""
    assert out.reply["echo"] == [1, "two", {"3": None}]
    assert "handling echo" in out.log and out.wall_s > 0
    assert f"{child.REQUEST_MARK} 0" in log.read_text()  # the log is kept where it was asked for


def test_several_requests_in_one_process_each_with_its_log(env):
    requests = [{"do": "echo", "value": i} for i in range(3)]
    with child.Child("tinychild", requests, env=env) as run:
        got = list(run.outcomes(60))
    assert [o.reply["echo"] for o in got] == [0, 1, 2]
    assert len({o.reply["pid"] for o in got}) == 1
    assert all(o.log.strip() == "handling echo" for o in got)


def test_a_raising_handler_is_failed_with_one_line(env):
    with child.Child("tinychild", [{"do": "raise"}, {"do": "unserializable"}, {"do": "echo", "value": 1}],
                     env=env) as run:
        raised, unserializable, after = run.outcomes(60)
    assert raised.status == "failed" and raised.error == "ValueError: bad value"
    assert raised.reason("capture") == "capture failed: ValueError: bad value"
    assert "Traceback" in raised.log  # the traceback stays in the log
    assert unserializable.status == "failed" and unserializable.error.startswith("TypeError: ")
    assert after.ok  # the child goes on with the next request


def test_timeout_kills_the_child_with_its_grandchild(env, tmp_path):
    pids = tmp_path / "pids"
    t0 = time.monotonic()
    out = child.run("tinychild", {"do": "sleep", "pids": str(pids)}, timeout_s=5, env=env)
    assert time.monotonic() - t0 < 30
    assert out.status == "timeout" and out.reason("worker") == "no result after 5 s (worker killed)"
    assert _wait_gone(_pids(pids))


def test_exit_and_signal_without_reply(env):
    with child.Child("tinychild", [{"do": "echo", "value": 1}, {"do": "exit"}, {"do": "echo", "value": 2}],
                     env=env) as run:
        got = list(run.outcomes(60))
    assert [o.status for o in got] == ["ok", "exited"]  # nothing after the request it did not survive
    assert got[1].returncode == 3
    assert got[1].reason("worker") == "worker exited 3 without a result: RuntimeError: giving up"
    out = child.run("tinychild", {"do": "sigkill"}, timeout_s=60, env=env)
    assert out.status == "killed" and out.signum == 9
    assert out.reason("worker") == "worker killed by SIGKILL (out of memory?): handling sigkill"


def test_keyboard_interrupt_kills_the_group(env, tmp_path):
    # Ctrl-C as Python's own handler raises it: an earlier test in the session (a kernel, a library) may have
    # left another handler on SIGINT, and interrupt_main calls whatever is installed
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_while_waiting(env, tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_while_waiting(env, tmp_path):
    pids = tmp_path / "pids"
    run = child.Child("tinychild", [{"do": "sleep", "pids": str(pids)}], env=env)
    started = threading.Event()

    def interrupt() -> None:
        _pids(pids)
        started.set()
        _thread.interrupt_main()  # Ctrl-C while the parent waits

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt), run:
        run.outcome(20)
    assert started.is_set() and _wait_gone(_pids(pids))


def test_an_uncollected_child_is_killed_when_closed(env, tmp_path):
    pids = tmp_path / "pids"
    run = child.Child("tinychild", [{"do": "sleep", "pids": str(pids)}], env=env)
    found = _pids(pids)
    run.close()
    assert _wait_gone(found)


def test_usage_line():
    r = subprocess.run([sys.executable, "-c", "import sys; from resnet_lab.core import child; "
                        "sys.exit(child.serve('some.module', print, []))"],
                       capture_output=True, text=True, timeout=60, env=child.child_env())
    assert r.returncode == 2 and "usage: python -m some.module REQUESTS.json REPLIES.jsonl" in r.stderr


def test_split_log_and_tail():
    text = f"start\n{child.REQUEST_MARK} 0\na\n{child.REQUEST_MARK} 1\nb\nValueError: x\nlast\n"
    assert child.split_log(text) == {0: "start\na\n", 1: "b\nValueError: x\nlast\n"}
    assert child.log_tail(child.split_log(text)[1]) == "ValueError: x"
    assert child.log_tail("") == "(no output)"


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_a_keras_child_skips_the_optional_imports_it_never_uses(backend):
    """Each backend's list (child.UNUSED) fails at import in its child; the rest imports as before (a JAX child
    imports jax)."""
    code = ("import sys, importlib\nfrom resnet_lab.core import child\nprint(child.skip_unused_imports())\n"
            "for name in ('sklearn', 'jax'):\n    try:\n        importlib.import_module(name)\n"
            "        print(name, 'ok')\n"
            "    except ImportError as e:\n        print(name, type(e).__name__)\n")
    env = {**os.environ, "KERAS_BACKEND": backend}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == repr(list(child.UNUSED[backend]))
    assert lines[1:] == [f"{name} {'ModuleNotFoundError' if name in child.UNUSED[backend] else 'ok'}"
                         for name in ("sklearn", "jax")]
    assert "sklearn" in child.UNUSED[backend] and ("jax" in child.UNUSED[backend]) is (backend != "jax")
