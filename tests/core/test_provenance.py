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
