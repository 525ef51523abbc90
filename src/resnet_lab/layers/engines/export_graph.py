"""The ONNX export as the engines that run it (ONNX Runtime, OpenVINO) name it: which export nodes a kernel
computes, and their Keras layers (:mod:`resnet_lab.layers.names`)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from resnet_lab.layers.names import kernel_nodes, producers
from resnet_lab.models.names import graph_relus, node_layers


@functools.cache
def graph(path: Path) -> tuple[dict[str, tuple[str, str, list[str]]], frozenset[str]]:
    """(the export's producers, its node names)."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    return producers(proto), frozenset(n.name for n in proto.graph.node)


def nodes_of(path: Path, kernel: str) -> list[str]:
    """The export's nodes an engine's kernel computes (:func:`resnet_lab.layers.names.kernel_nodes`)."""
    producers_, nodes = graph(path)
    return kernel_nodes(kernel, producers_, set(nodes))


def with_layers(kernels: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    """Each kernel with the Keras layers of the export nodes it computes (``nodes``; else its own name)."""
    relus = graph_relus(graph(path)[1])
    for k in kernels:
        k["layers"] = list(dict.fromkeys(x for node in k.get("nodes", [k["name"]]) for x in node_layers(node, relus)))
    return kernels
