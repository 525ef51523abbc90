from __future__ import annotations

from resnet_lab.core import provenance

CPUINFO = """\
processor	: 0
model name	: Intel(R) Xeon(R) Platinum 8480+
physical id	: 0
core id		: 0
flags		: fpu avx2 fma avx512f avx512_bf16 amx_tile amx_bf16
processor	: 1
model name	: Intel(R) Xeon(R) Platinum 8480+
physical id	: 0
core id		: 0
flags		: fpu avx2 fma avx512f avx512_bf16 amx_tile amx_bf16
"""


def test_cpu_info_parses_model_cores_and_isa():
    info = provenance.cpu_info(CPUINFO)
    assert info["model"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert info["physical_cores"] == 1  # two hyperthreads of one core
    assert info["isa"]["amx_bf16"] and info["isa"]["avx512f"] and not info["isa"]["amx_int8"]


def test_onednn_state_follows_env():
    assert provenance.onednn_state({"TF_ENABLE_ONEDNN_OPTS": "0"})["enabled"] is False
    assert provenance.onednn_state({"TF_ENABLE_ONEDNN_OPTS": "1"})["enabled"] is True


def test_git_state_outside_a_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv(provenance.COMMIT_ENV, raising=False)
    assert provenance.git_state(tmp_path)["commit"] is None


def test_git_state_of_a_copied_tree_comes_from_the_environment(repo_root, monkeypatch):
    monkeypatch.setenv(provenance.COMMIT_ENV, "abc123")
    monkeypatch.setenv(provenance.DIRTY_ENV, "1")
    state = provenance.git_state(repo_root)  # a checkout: the environment still wins
    assert (state["commit"], state["dirty"]) == ("abc123", True) and provenance.COMMIT_ENV in state["source"]


def test_collect_is_json_ready_and_has_the_essentials():
    info = provenance.collect(params={"a": 1})
    assert info["params"] == {"a": 1}
    assert info["git"]["commit"] and len(info["git"]["commit"]) == 40
    assert info["packages"]["resnet-lab"]
    assert info["cpu"]["logical_cpus"] >= 1


def test_the_recorded_onednn_state_is_what_tensorflow_logs_at_import():
    """The rule (core.host.onednn_default) against TensorFlow itself, on this host: unset, the value that turns
    this host's default over ("0" where it is on, "1" where off: the other one says the default again, what unset
    checks already), and a value TensorFlow does not read. Its import log says "oneDNN custom operations are on"
    exactly when enabled."""
    import os
    import subprocess
    import sys

    default = provenance.onednn_state({})["enabled"]
    cases = [None, "0" if default else "1", "maybe"]
    procs = []
    for value in cases:
        env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
        env.update({"TF_CPP_MIN_LOG_LEVEL": "0", "CUDA_VISIBLE_DEVICES": ""})
        if value is not None:
            env["TF_ENABLE_ONEDNN_OPTS"] = value
        code = ("from tensorflow.python.util import _pywrap_util_port as p; import tensorflow as tf; "
                "tf.constant(1.0) + 1.0; print('IsMklEnabled', p.IsMklEnabled())")
        procs.append((value, env, subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    for value, env, proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-2000:]
        said = provenance.onednn_state(env)
        logged = "oneDNN custom operations are on" in err
        assert logged is said["enabled"], (value, said, err[-1500:])
        assert f"IsMklEnabled {said['enabled']}" in out, (value, said, out)
