"""A record of measurements, read whole or not at all, and the kind of host it was measured on.

A record is a run folder (``outputs/runs/<run>/``: ``provenance.json``, ``03_benchmarks/bench_*.json``,
``01_model_selection/selection_bench.json``, ``02_op_extraction/inventories.json``,
``01_model_selection/op_inventory.json``) or a record of CSVs with a ``provenance.json`` beside them
(``outputs/reference/``: ``bench*.csv``, ``op_inventory.csv``). ``resnet-lab compare`` and
``resnet-lab history`` (:mod:`resnet_lab.runs.compare`, :mod:`resnet_lab.runs.history`) read records
through :func:`read` (:func:`load`: one with something to compare):

- **whole or not at all**: a file of the record that is truncated or does not parse (a CSV cut inside its
  header or a line, a JSON cut short, a CSV whose JSON twin holds another number of rows) is one
  :class:`~resnet_lab.core.errors.UsageError` line naming the file. What is left of such a record is never
  judged: a CSV cut inside its header would read as "no rows", and rows of the same configuration from
  another file would stand in for it.
- **host kind** (:class:`HostKind`): CPU model, available CPUs, GPU names. Speeds measured on two kinds
  differ by the machine, whatever the change: they are compared like with like only within one kind.
- **the committed record of a host kind** (:func:`reference_for`): ``outputs/reference/`` keeps one record
  per host kind: the folder itself (its ``provenance.json`` says its kind) and ``hosts/<slug>/`` folders
  (:meth:`HostKind.slug`), each a ``provenance.json`` with ``bench*.csv`` beside it.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path
from typing import Any

from resnet_lab.bench import identity
from resnet_lab.ceilings import peak
from resnet_lab.core import artifacts, host, provenance
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import shown

OP_KEYS = ("model", "backend", "mode", "stage", "platform", "precision")
HOSTS_DIR = "hosts"  # outputs/reference/hosts/<slug>/: the committed record of one more host kind


# ------------------------------------------------------------------------------------------ host kind
# Without measured facts on both sides (a record older than core.host), a kind is told by the older rule alone.
NAME_RULE = "the CPU name, CPU count and GPUs"


@dataclasses.dataclass(frozen=True, eq=False)
class HostKind:
    """What a speed depends on beyond the code: what the machine is (CPU name, the CPUs the run could use, the GPUs,
    and where the record has them :mod:`resnet_lab.core.host`'s facts: vendor, family, model number, stepping, ISA
    flags, L2/L3) and what it measured (notebook 00's GEMM peak per dtype, GFLOP/s; only a full, quiet measurement).

    Two kinds are equal when :meth:`differences` finds nothing: the names, CPUs and GPUs agree, every fact both
    state agrees and every peak both measured lies within :data:`resnet_lab.core.host.PEAK_TOLERANCE`. The hash is
    the name, CPUs and GPUs only, so equal kinds hash alike."""

    cpu: str | None
    cpus: int | None
    gpus: tuple[str, ...] = ()
    facts: tuple[tuple[str, Any], ...] = ()  # core.host's identity facts, sorted; () for an older record
    peaks: tuple[tuple[str, float], ...] = ()  # measured GEMM peak per dtype (GFLOP/s); () where none was measured

    def label(self) -> str:
        """E.g. "Intel(R) Xeon(R) Processor, 2 CPUs" or "…, 16 CPUs, NVIDIA H200"."""
        gpus = Counter(self.gpus)
        return ", ".join([self.cpu or "unknown CPU", f"{self.cpus or '?'} CPUs",
                          *(f"{n}× {g}" if n > 1 else g for g, n in gpus.items())])

    def describe(self) -> str:
        """The label with what tells the machine apart: e.g. "AMD EPYC, 2 CPUs (family 25 model 17, GEMM fp32
        215 / bf16 405 GFLOP/s)"."""
        facts, peaks = dict(self.facts), dict(self.peaks)
        parts = []
        if facts.get("family") is not None:
            parts.append(f"family {facts['family']} model {facts.get('model_number')}")
        if peaks:
            parts.append("GEMM " + " / ".join(f"{d} {v:.0f}" for d, v in sorted(peaks.items())) + " GFLOP/s")
        return self.label() + (f" ({', '.join(parts)})" if parts else "")

    def slug(self) -> str:
        """A folder name for the kind, e.g. "intel-xeon-processor-2cpus" (``outputs/reference/hosts/``), with the
        CPU family and model where known ("amd-epyc-f25m17-2cpus"): one name can hide two generations."""
        facts = dict(self.facts)
        label = self.label().lower()
        if facts.get("family") is not None:
            label = label.replace(",", f" f{facts['family']}m{facts.get('model_number')},", 1)
        text = re.sub(r"\((r|tm)\)", "", label)
        return re.sub(r"[^a-z0-9]+", "-", text.replace(" cpus", "cpus")).strip("-")

    def differences(self, other: HostKind) -> list[str]:
        """What tells this host (the baseline's) from ``other`` (the candidate's), each a phrase with this one's
        value first: "CPU family 25 vs 26", "GEMM fp32 peak 215 vs 508 GFLOP/s". Empty: one kind."""
        out = []
        if self.cpu != other.cpu:
            out.append(f"CPU {self.cpu} vs {other.cpu}")
        if self.cpus != other.cpus:
            out.append(f"{self.cpus} vs {other.cpus} CPUs")
        if self.gpus != other.gpus:
            out.append(f"GPUs {', '.join(self.gpus) or 'none'} vs {', '.join(other.gpus) or 'none'}")
        facts_a, facts_b = dict(self.facts), dict(other.facts)
        facts_a.pop("available_cpus", None), facts_b.pop("available_cpus", None)  # already compared
        return out + host.differences(facts_a, facts_b, dict(self.peaks), dict(other.peaks))

    def basis(self, other: HostKind) -> str:
        """What :meth:`differences` could go by for these two: the name rule always, the measured facts and peaks
        where both records have them; says which side lacks what (an older record falls back to the name rule)."""
        used = ["CPU name, CPUs, GPUs"]
        if self.facts and other.facts:
            used.append("CPU family/model/stepping, ISA flags, caches")
        if self.peaks and other.peaks:
            used.append("measured GEMM peaks")
        lacking = [f"the {role} has no {what}" for role, k in (("baseline", self), ("candidate", other))
                   for what, have in (("measured host facts", k.facts), ("full quiet GEMM peak", k.peaks)) if not have]
        return " + ".join(used) + (f" ({'; '.join(lacking)}: {NAME_RULE} decides there)" if lacking else "")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HostKind) and not self.differences(other)

    def __hash__(self) -> int:
        return hash((self.cpu, self.cpus, self.gpus))


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def host_facts(prov: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The identity facts (:data:`resnet_lab.core.host.IDENTITY_NAMES`) a provenance's ``cpu`` states, sorted;
    () where it states none of the measured ones (a record older than them)."""
    cpu = prov.get("cpu") or {}
    if cpu.get("family") is None and cpu.get("vendor") is None:
        return ()
    facts = {k: cpu.get(k) for k in host.IDENTITY_NAMES if k not in ("isa", "gpus") and cpu.get(k) is not None}
    isa = cpu.get("isa")
    if isinstance(isa, dict) and isa:
        facts["isa"] = tuple(sorted(f for f, on in isa.items() if on))
    return tuple(sorted((k, _frozen(v)) for k, v in facts.items()))


PEAK_FILES = ("00_environment/peak.json", "peak.json")  # a run folder's, a committed record's


def measured_peaks(folder: Path) -> tuple[tuple[str, float], ...]:
    """The GEMM peak per dtype a record measured (its ``peak.json``), where that was a full measurement on a quiet
    host (:func:`resnet_lab.ceilings.peak.is_full_measurement`, no ``loaded`` reason): a smoke run's small GEMMs
    or a busy neighbour would read as another machine. () where there is none. ValueError naming the file where
    it is cut short or not a peak document (the record is then not judged, as with any damaged file)."""
    for rel in PEAK_FILES:
        path = folder / rel
        if not path.is_file():
            continue
        doc = _read_json(path)
        try:
            if not isinstance(doc, dict) or not peak.is_full_measurement(doc) or peak.loaded_reasons(doc):
                return ()
            return tuple(sorted((str(d), float(v)) for d, v in (doc.get("peak_gflops") or {}).items() if v))
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise ValueError(f"{path}: not a peak document ({type(exc).__name__}: {exc})") from exc
    return ()


def host_kind(prov: dict[str, Any], rows: list[dict[str, Any]] = (),
              peaks: tuple[tuple[str, float], ...] = ()) -> HostKind:
    """The kind of host a record was measured on: its provenance's CPU, GPUs and measured facts, and ``peaks``
    (:func:`measured_peaks`); where the provenance does not say the CPU (an older record), what its rows say
    (``cpu_model``, ``available_cpus``, the most common)."""
    cpu = prov.get("cpu") or {}
    model, cpus = cpu.get("model"), cpu.get("available_cpus")
    if model is None:
        model = next(iter(Counter(r["cpu_model"] for r in rows if r.get("cpu_model")).most_common(1)), (None,))[0]
    if cpus is None:
        cpus = next(iter(Counter(r["available_cpus"] for r in rows if r.get("available_cpus")).most_common(1)),
                    (None,))[0]
    gpus = tuple(sorted(str(g.get("name")) for g in prov.get("gpus") or [] if isinstance(g, dict)))
    return HostKind(model, int(cpus) if cpus is not None else None, gpus, host_facts(prov), tuple(peaks))


# ------------------------------------------------------------------------------------------ rows
def images_per_step(row: dict[str, Any]) -> int:
    """The images one timed step of a row processes (all replicas): what turns a step time into images/sec."""
    return int(row.get("global_batch") or row.get("batch_size") or 1)


def process_images_per_sec(row: dict[str, Any]) -> list[float]:
    """Each process's images/sec of a row measured in several processes: ``process_means`` is each process's
    mean step time in seconds (:func:`resnet_lab.bench.stats.process_fields`), read typed by
    :func:`resnet_lab.bench.identity.read_row`. Empty where the row has none."""
    images = images_per_step(row)
    return [images / float(m) for m in row.get("process_means") or [] if m and float(m) > 0]


# ------------------------------------------------------------------------------------------ reading
@dataclasses.dataclass
class Run:
    path: Path
    name: str
    provenance: dict[str, Any]
    rows: list[dict[str, Any]]
    ops: dict[tuple, dict[str, Any]]
    peaks: tuple[tuple[str, float], ...] = ()  # measured_peaks of its folder

    @property
    def kind(self) -> HostKind:
        return host_kind(self.provenance, self.rows, self.peaks)


def _read_json(path: Path) -> Any:
    try:
        return artifacts.read_json(path)
    except ValueError as exc:
        raise ValueError(f"{path}: truncated or not JSON ({exc})") from exc


def _bench_rows(path: Path) -> list[dict[str, Any]]:
    """The speed rows of a run folder: 03's matrices and 01's selection rows as JSON (each row's per-process
    means, so a row of several processes is compared on them). A folder without them (a committed record in
    ``outputs/reference``, a ``resnet-lab bench`` or ``gpu-run`` folder) gives its own ``bench*.json``, else
    its ``bench*.csv``. A CSV beside the JSON it twins must hold as many rows, or the record is not judged."""
    json_files = [*sorted(path.glob("03_benchmarks/bench_*.json")), path / "01_model_selection/selection_bench.json"]
    rows = _rows_of(path, [f for f in json_files if f.exists()])
    if rows:
        return rows
    kept = sorted(path.glob("bench*.json"))
    return [r for r in _rows_of(path, kept or sorted(path.glob("bench*.csv"))) if "images_per_sec" in r]


def _rows_of(path: Path, files: list[Path]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in files:
        read = identity.read_rows(f)
        rows += [{**r, "source": f.relative_to(path).as_posix()} for r in read]
        # The CSV twin is not what is compared, but a record with a damaged file is not judged: it is read and
        # holds as many rows as its JSON (a CSV cut exactly between two lines still parses).
        twin = f.with_suffix(".csv")
        if f.suffix == ".json" and twin.exists() and (n := len(identity.read_rows(twin))) != len(read):
            raise ValueError(f"{twin}: {n} rows, but {f.name} beside it has {len(read)}: one of the two is cut short")
    return rows


def _op_key(r: dict[str, Any]) -> tuple:
    return tuple(r.get(k) or "tensorflow" if k == "backend" else r.get(k) for k in OP_KEYS)


def _op_records(path: Path) -> dict[tuple, dict[str, Any]]:
    ops: dict[tuple, dict[str, Any]] = {}
    # 01 captures at a small batch, 02 at the report's: 02's records (with shapes) win for the same key
    for rel in ("01_model_selection/op_inventory.json", "02_op_extraction/inventories.json"):
        if (path / rel).exists():
            records = _read_json(path / rel)
            if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
                raise ValueError(f"{path / rel}: not a list of op inventories")
            for r in records:
                if r.get("opcodes"):
                    ops[_op_key(r)] = r
    if not ops and (path / "op_inventory.csv").exists():  # long format: one opcode per line, TensorFlow
        for line in artifacts.read_csv(path / "op_inventory.csv"):
            r = {k: v or None for k, v in line.items()}
            key = _op_key(r)
            rec = ops.setdefault(key, {**dict(zip(OP_KEYS, key, strict=True)), "opcodes": {}})
            try:
                rec["opcodes"][r["opcode"]] = int(r["count"])
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path / 'op_inventory.csv'}: not an op inventory ({exc!r})") from exc
    return ops


def read_provenance(folder: Path, role: str = "run") -> dict[str, Any]:
    """A record's ``provenance.json``: UsageError (one line, naming the file) where it is missing, cut short
    or not a JSON object."""
    path = folder / "provenance.json"
    if not path.exists():
        raise UsageError(f"{role}: '{folder}' is not a run: it has no provenance.json")
    try:
        prov = _read_json(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{role}: {_damaged(exc)}") from exc
    if not isinstance(prov, dict):
        raise UsageError(f"{role}: {path}: not a provenance record (a JSON object)")
    return prov


def _damaged(exc: BaseException) -> str:
    """The error of a damaged file as one line (it starts with the file's path)."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def read(path: str | Path, role: str = "run") -> Run:
    """A run folder or a CSV record, read whole: UsageError (one line) when it is not a folder with a
    provenance.json, or when one of its files is cut short or does not parse (the line names the file).
    Its rows and op inventories may be empty (a run of notebook 00 alone)."""
    p = Path(path)
    if not p.is_dir():
        raise UsageError(f"{role}: '{path}' is not a folder (a run folder under outputs/runs/ or outputs/reference)")
    prov = read_provenance(p, role)
    try:
        rows, ops, peaks = _bench_rows(p), _op_records(p), measured_peaks(p)
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"{role}: {_damaged(exc)}") from exc
    return Run(p, prov.get("run") or p.name, prov, rows, ops, peaks)


def load(path: str | Path, role: str = "run") -> Run:
    """:func:`read`, and UsageError where the record has nothing to compare (no rows, no op inventories)."""
    run = read(path, role)
    if not run.rows and not run.ops:
        raise UsageError(f"{role}: '{path}' has no benchmark rows (03_benchmarks/bench_*.json, bench*.csv) and no "
                         "op inventories (02_op_extraction/inventories.json, op_inventory.csv)")
    return run


def kind_of(folder: Path) -> HostKind:
    """A record's host kind from its provenance.json alone, where that says the CPU (every run folder's
    does); else from its rows too. UsageError where the record cannot be read."""
    prov = read_provenance(folder)
    if (prov.get("cpu") or {}).get("model") and (prov.get("cpu") or {}).get("available_cpus"):
        try:
            return host_kind(prov, peaks=measured_peaks(folder))
        except (OSError, ValueError) as exc:
            raise UsageError(f"run: {_damaged(exc)}") from exc
    return read(folder).kind


# ------------------------------------------------------------------------------------------ the committed record
def reference_root(outputs: Path) -> Path | None:
    """The committed record: ``<outputs>/reference``, else the checkout's ``outputs/reference`` (the first
    that holds one)."""
    for d in (outputs / "reference", provenance.package_root().parent / "outputs" / "reference"):
        if reference_records(d):
            return d
    return None


def reference_records(root: Path) -> list[Path]:
    """The records of a reference folder: the folder itself where it has a provenance.json, then each
    ``hosts/<slug>/`` that has one."""
    found = [root] if (root / "provenance.json").is_file() else []
    return found + sorted(p.parent for p in root.glob(f"{HOSTS_DIR}/*/provenance.json"))


def is_reference_root(folder: Path) -> bool:
    """A folder of per-host-kind records (``hosts/*/provenance.json``), which ``compare`` resolves to the
    record of the candidate's kind."""
    return any(folder.glob(f"{HOSTS_DIR}/*/provenance.json"))


def reference_for(root: Path, kind: HostKind) -> Path | None:
    """The record of ``root`` measured on a host of ``kind``, or None."""
    return next((r for r in reference_records(root) if kind_of(r) == kind), None)


def reference_kinds(root: Path) -> list[HostKind]:
    return [kind_of(r) for r in reference_records(root)]


def describe_kinds(kinds: list[HostKind]) -> str:
    return "; ".join(k.describe() for k in kinds) or "none"


def commit_hint(run: Path, kind: HostKind) -> str:
    """How to commit ``run`` (a run folder of a host kind without a record) as that kind's record: the command
    (:mod:`resnet_lab.runs.keep`), with the run's path as a shared report may print it."""
    return (f"`resnet-lab record {shown(run)}` (a quiet host's `make report`) writes "
            f"outputs/reference/{HOSTS_DIR}/{kind.slug()}/, then git add it")
