"""The row's one schema (bench.schema): the committed records' columns, and every field a row writes."""

from __future__ import annotations

import dataclasses
import glob

from helpers import ROOT

from resnet_lab.bench import identity, schema
from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import BenchConfig


def _headers() -> dict[str, list[str]]:
    return {path: open(path).readline().strip().split(",")
            for path in sorted(glob.glob(str(ROOT / "outputs" / "reference" / "**" / "bench*.csv"), recursive=True))}


def test_the_schema_is_the_committed_records_csv_header():
    headers = _headers()
    newest = [cols for cols in headers.values() if len(cols) == len(schema.CSV_FIELDS)]
    assert newest, "no committed record has today's columns"
    assert all(cols == list(schema.CSV_FIELDS) for cols in newest)
    # older records: columns were added over time, never reordered or renamed
    for path, cols in headers.items():
        it = iter(schema.CSV_FIELDS)
        assert all(c in it for c in cols), path


def test_every_field_a_row_writes_is_in_the_schema():
    cfg = BenchConfig(model="tiny-resnet", batch_size=4, image_size=32, steps=2, min_time_s=0.0)
    result = {"status": "ok", "step_times": [0.1, 0.12], "first_step_s": 1.0, "timed_s": 0.22, "setup_s": 1.0}
    one = bench_rows.make_row(cfg, result, None)
    two = bench_rows.combine(dataclasses.replace(cfg, repeats=2), [one, dict(one)])
    skipped = bench_rows.skipped_row(cfg, "skipped", "why")
    for row in (one, two, skipped):
        assert list(row) == list(schema.ALL_FIELDS)
    assert set(schema.TYPES) >= {f.type for f in schema.FIELDS}
    assert len(schema.BY_NAME) == len(schema.FIELDS)  # each name once
    assert schema.BY_NAME["process_means"].unit == "s" and not schema.BY_NAME["process_means"].csv
    assert set(identity.IDENTITY) <= set(schema.CSV_FIELDS)
    assert all(f.meaning for f in schema.FIELDS)
