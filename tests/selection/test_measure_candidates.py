"""What notebook 01 measured, saved beside the decision; the opcodes one candidate alone uses."""

from __future__ import annotations

import json

from resnet_lab.hlo import parser
from resnet_lab.selection import measure


def test_measurements_are_saved_one_line_per_opcode(tmp_path):
    row = {"model": "m", "mode": "train", "stage": "before", "platform": "cpu", "precision": "fp32",
           "opcodes": {"add": 2}, "opcodes_by_role": {role: {} for role in parser.ROLES}}
    measure.save_measurements(tmp_path, [row], [])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "op_inventory.csv", "op_inventory.json", "selection_bench.csv", "selection_bench.json"]
    assert json.loads((tmp_path / "op_inventory.json").read_text()) == [row]
    lines = (tmp_path / "op_inventory.csv").read_text().splitlines()
    assert lines == ["model,mode,stage,platform,precision,opcode,count," + ",".join(parser.ROLES),
                     "m,train,before,cpu,fp32,add,2," + ",".join("0" * len(parser.ROLES))]


def test_unique_ops():
    measured = {"a": {"train_before_opcode_set": ["add", "convolution"]},
                "b": {"train_before_opcode_set": ["convolution", "select"]}, "c": {}}
    assert measure.unique_ops(measured) == {"a": ["add"], "b": ["select"], "c": []}
