"""The results store: every run of every host kind in one database, appended to, never rewritten.

SQLite by default (``outputs/store.sqlite``: embedded, nothing to start), PostgreSQL for a team
(``--store postgresql://user@host/db`` or ``$RESNET_LAB_STORE``; psycopg 3), both through SQLAlchemy Core. The
tables are the anchors' (LLVM's LNT: machines, orders, runs, samples; conbench: a hardware hash):

==================  ========================================================================================
``store_meta``      ``schema_version`` (:data:`SCHEMA_VERSION`): a store of a newer schema is refused, one line
``host_kinds``      one row per :class:`~resnet_lab.runs.record.HostKind`: ``facts_hash`` (SHA-256 of the CPU name,
                    CPU count, GPUs and the measured facts: :data:`KIND_HASH_COVERS`), the facts and the GEMM peaks
                    as JSON. Two kinds with one hash but peaks apart beyond ``core.host.PEAK_TOLERANCE`` are two rows
``hosts``           a machine's name within its kind
``commits``         a git commit and its ``ordinal`` (the order commits were first pushed in: LNT's order)
``runs``            one run folder: ``run_key`` (its name and start time; unique: pushing twice adds nothing),
                    params name, commit, host, kind, times, status, environment (packages, oneDNN, capabilities);
                    ``committed``: a committed record of ``outputs/reference/`` (its rows dated by themselves)
``rows``            one benchmark row (``bench/schema.py``'s fields as JSON, the identity key and its hash, the
                    figures a series is drawn from; ``quoted``: one of the configurations 03's summary quotes,
                    the ones ``resnet-lab history`` follows)
``samples``         a row's per-process images/sec (the unit that varies; a row of one process has one)
``ops``             the op inventories (model, backend, mode, stage, platform, precision, opcode, count)
``layers``          per-layer profiles (``03_benchmarks/layers*.json``): engine, configuration, layer, ms
``conformance``     conformance verdicts: per engine and kit, per case (:data:`CONFORMANCE_FILES`)
==================  ========================================================================================

Migrations: a stated rule, not a framework. :data:`MIGRATIONS` maps a version to the SQL that takes a store from it
to the next; :func:`open_store` applies them in order inside one transaction. Version 1 is the first; 2 added
``rows.quoted`` and ``runs.committed`` (NULL in a store migrated from 1: history then finds a run's quoted rows as
for a record without 03's ``results.json``, the fastest ones, and takes no run for a committed record).

Concurrency: a push is one transaction that first takes the store's write lock (SQLite: ``BEGIN IMMEDIATE``;
PostgreSQL: a transaction-scoped advisory lock), so two processes pushing at once are serialized and neither loses
anything; a run already there is found under the lock and skipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from resnet_lab.bench import identity
from resnet_lab.core import provenance
from resnet_lab.core.errors import UsageError
from resnet_lab.runs import headline, record

SCHEMA_VERSION = 2
STORE_ENV = "RESNET_LAB_STORE"
DEFAULT_FILE = "store.sqlite"  # under the outputs root
SCHEMES = ("sqlite", "postgresql")
KIND_HASH_COVERS = "CPU name, CPUs, GPUs, vendor/family/model/stepping, ISA flags, L2/L3 (peaks compared apart)"
RESULTS_03 = "03_benchmarks/results.json"  # what 03's summary quotes: the rows marked ``quoted``
UNFINISHED = ("running",)  # a run folder's provenance status while `resnet-lab run` is still writing it
MIGRATIONS: dict[int, list[str]] = {  # version -> statements that take a store from it to version + 1
    1: ['ALTER TABLE "rows" ADD COLUMN quoted BOOLEAN', 'ALTER TABLE runs ADD COLUMN committed BOOLEAN'],
}
_PG_LOCK = 0x7265736E  # "resn": the advisory lock every push takes on PostgreSQL


# ------------------------------------------------------------------------------------------ the URL
def resolve_url(given: str | None, outputs: str | Path) -> str:
    """The store's SQLAlchemy URL: ``given``, else ``$RESNET_LAB_STORE``, else SQLite at ``<outputs>/store.sqlite``;
    ``postgresql://`` is read with psycopg 3. UsageError, one line, for any other scheme (before anything opens)."""
    url = given or os.environ.get(STORE_ENV) or f"sqlite:///{Path(outputs) / DEFAULT_FILE}"
    scheme = url.split("://", 1)[0] if "://" in url else ""
    base = scheme.split("+", 1)[0]
    if base not in SCHEMES:
        raise UsageError(f"--store: '{_safe(url)}' is not a store URL (allowed: sqlite:///PATH, "
                         "postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DB or postgresql:///DB?host=SOCKET_DIR)")
    if base == "postgresql" and scheme == "postgresql":
        url = "postgresql+psycopg" + url[len("postgresql"):]
    if base == "sqlite":
        path = url.split(":///", 1)[1] if ":///" in url else ""
        if not path or path == ":memory:":
            raise UsageError(f"--store: '{url}' names no file (sqlite:///PATH; the store is meant to last)")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    return url


def _safe(url: str) -> str:
    """The URL as a line may print it: no password."""
    if "://" in url and "@" in url.split("://", 1)[1]:
        scheme, rest = url.split("://", 1)
        cred, host = rest.split("@", 1)
        return f"{scheme}://{cred.split(':', 1)[0]}:***@{host}" if ":" in cred else url
    return url


# ------------------------------------------------------------------------------------------ the tables
def _tables():
    import sqlalchemy as sa

    md = sa.MetaData()
    text, js = sa.Text, sa.Text  # JSON kept as text: one form on both databases, read by json.loads
    sa.Table("store_meta", md, sa.Column("key", sa.String(64), primary_key=True), sa.Column("value", text))
    sa.Table("host_kinds", md, sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
             sa.Column("facts_hash", sa.String(64), nullable=False, index=True),
             sa.Column("label", text, nullable=False), sa.Column("description", text, nullable=False),
             sa.Column("slug", text, nullable=False), sa.Column("facts", js, nullable=False),
             sa.Column("peaks", js, nullable=False), sa.Column("covers", text, nullable=False))
    sa.Table("hosts", md, sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
             sa.Column("name", text, nullable=False),
             sa.Column("host_kind_id", sa.Integer, sa.ForeignKey("host_kinds.id"), nullable=False),
             sa.UniqueConstraint("name", "host_kind_id"))
    sa.Table("commits", md, sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
             sa.Column("sha", sa.String(64), nullable=False, unique=True),
             sa.Column("ordinal", sa.Integer, nullable=False), sa.Column("branch", text))
    sa.Table("runs", md, sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
             sa.Column("run_key", sa.String(200), nullable=False, unique=True),
             sa.Column("name", text, nullable=False), sa.Column("params_name", text),
             sa.Column("commit_id", sa.Integer, sa.ForeignKey("commits.id")),
             sa.Column("dirty", sa.Boolean), sa.Column("host_id", sa.Integer, sa.ForeignKey("hosts.id")),
             sa.Column("host_kind_id", sa.Integer, sa.ForeignKey("host_kinds.id"), nullable=False, index=True),
             sa.Column("started_at", text), sa.Column("finished_at", text), sa.Column("status", text),
             sa.Column("environment", js, nullable=False), sa.Column("pushed_at", text, nullable=False),
             sa.Column("committed", sa.Boolean))
    sa.Table("rows", md, sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
             sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False, index=True),
             sa.Column("identity_hash", sa.String(64), nullable=False, index=True),
             sa.Column("identity", js, nullable=False), sa.Column("label", text), sa.Column("source", text),
             sa.Column("mode", text), sa.Column("precision", text), sa.Column("backend", text),
             sa.Column("batch_size", sa.Integer), sa.Column("status", text),
             sa.Column("images_per_sec", sa.Float), sa.Column("mfu", sa.Float), sa.Column("processes", sa.Integer),
             sa.Column("row", js, nullable=False), sa.Column("quoted", sa.Boolean))
    sa.Table("samples", md, sa.Column("row_id", sa.Integer, sa.ForeignKey("rows.id"), primary_key=True),
             sa.Column("process", sa.Integer, primary_key=True), sa.Column("images_per_sec", sa.Float))
    sa.Table("ops", md, sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False, index=True),
             *(sa.Column(k, text) for k in record.OP_KEYS), sa.Column("opcode", text, nullable=False),
             sa.Column("count", sa.Integer, nullable=False))
    sa.Table("layers", md, sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False, index=True),
             sa.Column("source", text), sa.Column("engine", text), sa.Column("config", js),
             sa.Column("layer", text), sa.Column("ms", sa.Float))
    sa.Table("conformance", md,
             sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False, index=True),
             sa.Column("source", text), sa.Column("engine", text), sa.Column("case", text),
             sa.Column("status", text), sa.Column("detail", js))
    return md


@dataclasses.dataclass
class Store:
    """An open store: its engine and tables (:func:`open_store`)."""

    url: str
    engine: Any
    tables: Any

    @property
    def shown(self) -> str:
        return _safe(self.url.replace("postgresql+psycopg", "postgresql"))

    def t(self, name: str) -> Any:
        return self.tables.tables[name]

    def write(self) -> Any:
        """A transaction holding the store's write lock (see the module's Concurrency)."""
        return _Locked(self)

    def close(self) -> None:
        self.engine.dispose()


class _Locked:
    def __init__(self, store: Store) -> None:
        self.store, self.ctx = store, store.engine.begin()

    def __enter__(self):
        conn = self.ctx.__enter__()
        if self.store.engine.dialect.name == "postgresql":
            import sqlalchemy as sa

            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK})
        return conn

    def __exit__(self, *exc):
        return self.ctx.__exit__(*exc)


def _engine(url: str):
    import sqlalchemy as sa

    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 60})

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi_conn, _record):  # SQLAlchemy's recipe: let the driver not begin, begin ourselves
            dbapi_conn.isolation_level = None
            dbapi_conn.execute("PRAGMA foreign_keys=ON")

        @sa.event.listens_for(engine, "begin")
        def _begin(conn):  # every transaction takes the write lock at once: pushes are serialized
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return sa.create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 10})


def open_store(given: str | None = None, outputs: str | Path = "outputs", create: bool = True) -> Store:
    """The store at ``given`` (:func:`resolve_url`), its tables made where it is new and its schema version checked:
    UsageError, one line, where it does not connect or is of a newer schema than this code reads."""
    import sqlalchemy as sa

    url = resolve_url(given, outputs)
    tables = _tables()
    try:
        engine = _engine(url)
        with _Locked(Store(url, engine, tables)) as conn:
            have = sa.inspect(conn).has_table("store_meta")
            if not have:
                if not create:
                    raise UsageError(f"--store: '{_safe(url)}' holds no results store (push a run first)")
                tables.create_all(conn)
                conn.execute(tables.tables["store_meta"].insert(), [{"key": "schema_version",
                                                                    "value": str(SCHEMA_VERSION)}])
            version = int(conn.execute(sa.select(tables.tables["store_meta"].c.value).where(
                tables.tables["store_meta"].c.key == "schema_version")).scalar_one())
            if version > SCHEMA_VERSION:
                raise UsageError(f"--store: '{_safe(url)}' is a store of schema {version}; this resnet-lab reads up to "
                                 f"{SCHEMA_VERSION} (update resnet-lab; nothing was written)")
            for v in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[v]:
                    conn.execute(sa.text(statement))
            if version < SCHEMA_VERSION:
                conn.execute(tables.tables["store_meta"].update().where(
                    tables.tables["store_meta"].c.key == "schema_version").values(value=str(SCHEMA_VERSION)))
    except sa.exc.SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise UsageError(f"--store: cannot open '{_safe(url)}': {first}") from exc
    return Store(url, engine, tables)


# ------------------------------------------------------------------------------------------ pushing a run
def _kind_doc(kind: record.HostKind) -> dict[str, Any]:
    """What names a host kind (:data:`KIND_HASH_COVERS`), as the store keeps it (``host_kinds.facts``)."""
    return {"cpu": kind.cpu, "cpus": kind.cpus, "gpus": list(kind.gpus), "facts": [list(f) for f in kind.facts]}


def kind_hash(kind: record.HostKind) -> str:
    """The hash of what names a host kind (:data:`KIND_HASH_COVERS`): every fact, so two machines that differ in
    one field are never one kind (conbench #1412's complaint); the peaks are compared apart (a tolerance)."""
    return hashlib.sha256(json.dumps(_kind_doc(kind), sort_keys=True, default=str).encode()).hexdigest()


def _find_kind(conn, store: Store, kind: record.HostKind) -> int | None:
    import sqlalchemy as sa

    t = store.t("host_kinds")
    for r in conn.execute(sa.select(t).where(t.c.facts_hash == kind_hash(kind))).mappings():
        if stored_kind(r) == kind:
            return int(r["id"])
    return None


def kind_id(store: Store, kind: record.HostKind) -> int | None:
    """The id of ``kind`` in the store (its measured facts and peaks: :func:`stored_kind`), None where it has none."""
    with store.engine.connect() as conn:
        return _find_kind(conn, store, kind)


def _find_or_add_kind(conn, store: Store, kind: record.HostKind) -> int:
    found = _find_kind(conn, store, kind)
    if found is not None:
        return found
    h = kind_hash(kind)
    t = store.t("host_kinds")
    return int(conn.execute(t.insert().values(
        facts_hash=h, label=kind.label(), description=kind.describe(), slug=kind.slug(),
        facts=json.dumps(_kind_doc(kind), default=str),
        peaks=json.dumps([list(p) for p in kind.peaks]), covers=KIND_HASH_COVERS)).inserted_primary_key[0])


def stored_kind(r: Mapping[str, Any]) -> record.HostKind:
    """A ``host_kinds`` row as the :class:`~resnet_lab.runs.record.HostKind` it was made from."""
    doc = json.loads(r["facts"])
    facts = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in doc.get("facts") or [])
    return record.HostKind(doc.get("cpu"), doc.get("cpus"), tuple(doc.get("gpus") or ()), facts,
                           tuple((d, float(v)) for d, v in json.loads(r["peaks"])))


def _find_or_add(conn, table, where: Mapping[str, Any], values: Mapping[str, Any] | None = None) -> int:
    import sqlalchemy as sa

    found = conn.execute(sa.select(table.c.id).where(*(table.c[k] == v for k, v in where.items()))).scalar()
    if found is not None:
        return int(found)
    return int(conn.execute(table.insert().values(**where, **(values or {}))).inserted_primary_key[0])


def run_key(prov: Mapping[str, Any], folder: Path) -> str:
    """What names a run in the store: its folder's name and start time (one run folder, pushed from anywhere)."""
    return f"{prov.get('run') or folder.name}@{prov.get('started_at') or ''}"


LAYER_CONFIG = ("model", "mode", "batch_size", "image_size", "precision", "recipe", "compiled", "framework")


def layer_config(rec: Mapping[str, Any]) -> str:
    """What a per-layer profile was measured on, as the ``layers`` table keeps it (JSON of :data:`LAYER_CONFIG`)."""
    return json.dumps({k: rec.get(k) for k in LAYER_CONFIG if k in rec}, default=str)


def layer_history(store: Store, kind: record.HostKind, rec: Mapping[str, Any]) -> list[dict[str, float]]:
    """Every stored per-layer profile (layer → ms, one per run, oldest first) of ``rec``'s engine and configuration
    on host kind ``kind``: what :func:`resnet_lab.layers.diff.layer_noise` reads a layer's run-to-run noise from."""
    import sqlalchemy as sa

    kid = kind_id(store, kind)
    if kid is None:
        return []
    lay, runs_ = store.t("layers"), store.t("runs")
    q = (sa.select(lay.c.run_id, lay.c.layer, lay.c.ms).select_from(lay.join(runs_, lay.c.run_id == runs_.c.id))
         .where(runs_.c.host_kind_id == kid, lay.c.engine == (rec.get("engine") or rec.get("backend")),
                lay.c.config == layer_config(rec)).order_by(runs_.c.started_at, lay.c.run_id))
    out: dict[int, dict[str, float]] = {}
    with store.engine.connect() as conn:
        for m in conn.execute(q).mappings():
            out.setdefault(m["run_id"], {})[m["layer"]] = float(m["ms"])
    return list(out.values())


def _layer_records(folder: Path) -> Iterator[dict[str, Any]]:
    for f in sorted([*folder.glob("03_benchmarks/layers*.json"), *folder.glob("layers/layers*.json")]):  # run, record
        try:
            doc = json.loads(f.read_text())
        except ValueError as exc:
            raise ValueError(f"{f}: truncated or not JSON ({exc})") from exc
        records = doc if isinstance(doc, list) else doc.get("records") or []
        for rec in records.values() if isinstance(records, dict) else records:  # layers.json: {name: record}
            if not isinstance(rec, dict):
                continue
            config = layer_config(rec)
            for layer in rec.get("layers") or []:
                if isinstance(layer, dict) and layer.get("ms") is not None:
                    yield {"source": f.name, "engine": rec.get("engine") or rec.get("backend"),
                           "config": config, "layer": layer.get("layer") or layer.get("name"),
                           "ms": float(layer.get("median_ms", layer["ms"]))}  # over its steps, where it has them


CONFORMANCE_FILES = ("02_op_extraction/conformance_runs.csv", "02_op_extraction/conformance_not_passed.csv",
                     "conformance/runs.csv", "conformance/cases_*.csv")  # 02's tables; a record's conformance/


def _conformance_records(folder: Path) -> Iterator[dict[str, Any]]:
    """A run's conformance verdicts: per engine and kit (``*runs.csv``: case ``<kit> *``, status ``pass`` when every
    case passed, ``skipped`` when the engine was not there, else ``fail``) and per case (02's cases that did not
    pass; a record's ``cases_<ir>_<mode>_<engine>.csv``: every case), each case as ``<kit> <case>``. Each CSV
    row whole in ``detail``."""
    import csv

    for pattern in CONFORMANCE_FILES:
        for f in sorted(folder.glob(pattern)):
            try:
                with f.open(newline="") as fh:
                    found = list(csv.DictReader(fh))
            except (OSError, UnicodeDecodeError, csv.Error) as exc:
                raise ValueError(f"{f}: not a readable CSV ({exc})") from exc
            named = f.stem.split("_")  # cases_<ir>_<mode>_<engine>
            for r in found:
                kit = r.get("kit") or (f"{named[1]}:{named[2]}" if len(named) >= 4 else "")
                if f.name.endswith("runs.csv"):
                    bad = sum(int(_float(r.get(k)) or 0) for k in ("fail", "unsupported"))
                    status = ("skipped" if str(r.get("note") or "").startswith("skipped") else
                              "pass" if not bad and _float(r.get("pass")) else "fail")
                    case = f"{kit} *"
                else:
                    status, case = r.get("status"), f"{kit} {r.get('case')}"
                engine = r.get("engine") or named[-1]
                yield {"source": f.name, "engine": engine, "case": case, "status": status,
                       "detail": json.dumps(r, default=str)}


def read_folder(folder: str | Path) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
    """A run folder as :func:`push` takes it in: the run (:func:`resnet_lab.runs.record.read`), its per-layer
    profiles and conformance results; UsageError, one line, for a folder that is not a run or is cut short. The
    command reads every folder first, so that bad input writes nothing (not even the committed records)."""
    folder = Path(folder)
    run = record.read(folder)
    try:
        return run, list(_layer_records(folder)), list(_conformance_records(folder))
    except ValueError as exc:
        raise UsageError(f"run: {str(exc).splitlines()[0]}") from exc


def push(store: Store, folder: str | Path, committed: bool = False) -> dict[str, Any]:
    """Add a run folder (:func:`resnet_lab.runs.record.read`: whole or not at all) to the store, in one transaction.
    Idempotent: a run already there (its :func:`run_key`) adds nothing. UsageError, one line, for a folder that is
    not a run or is cut short; nothing is written then. ``committed``: a committed record (:func:`push_records`)."""
    import sqlalchemy as sa

    folder = Path(folder)
    run, layers, conformance = read_folder(folder)  # raises before the store is touched
    prov, kind = run.provenance, run.kind
    if prov.get("status") in UNFINISHED:  # the store is append-only: a run half-written would stay half
        raise UsageError(f"run: '{folder.name}' is {prov['status']} (push it when it has finished; the store "
                         "keeps a run as first pushed)")
    quoted = headline.quoted_keys(run.rows, _results_03(folder))
    key = run_key(prov, folder)
    git = prov.get("git") or {}
    with store.write() as conn:
        runs = store.t("runs")
        if conn.execute(sa.select(runs.c.id).where(runs.c.run_key == key)).scalar() is not None:
            return {"run": key, "added": False, "rows": 0, "kind": kind.describe()}
        kind_id = _find_or_add_kind(conn, store, kind)
        host_id = _find_or_add(conn, store.t("hosts"), {"name": str(prov.get("host") or "unknown"),
                                                        "host_kind_id": kind_id})
        commit_id = None
        if git.get("commit"):
            commits = store.t("commits")
            ordinal = (conn.execute(sa.select(sa.func.max(commits.c.ordinal))).scalar() or 0) + 1
            commit_id = _find_or_add(conn, commits, {"sha": git["commit"]}, {"ordinal": ordinal,
                                                                             "branch": git.get("branch")})
        environment = {k: prov.get(k) for k in ("packages", "onednn", "capabilities", "env", "python", "platform",
                                                "collected_at")}
        run_id = conn.execute(runs.insert().values(
            run_key=key, name=str(prov.get("run") or folder.name), params_name=(prov.get("params") or {}).get("name"),
            commit_id=commit_id, dirty=bool(git.get("dirty")), host_id=host_id, host_kind_id=kind_id,
            started_at=prov.get("started_at"), finished_at=prov.get("finished_at"), status=prov.get("status"),
            environment=json.dumps(environment, default=str), pushed_at=provenance.now_iso(),
            committed=committed)).inserted_primary_key[0]
        n = 0
        for row in run.rows:
            values, samples = row_values(row)
            row_id = conn.execute(store.t("rows").insert().values(
                run_id=run_id, **values, quoted=identity.match_key(row) in quoted)).inserted_primary_key[0]
            if samples:
                conn.execute(store.t("samples").insert(), [{"row_id": row_id, "process": i, "images_per_sec": s}
                                                           for i, s in enumerate(samples)])
            n += 1
        ops = [{"run_id": run_id, **dict(zip(record.OP_KEYS, k, strict=True)), "opcode": op, "count": int(c)}
               for k, inv in run.ops.items() for op, c in (inv.get("opcodes") or {}).items()]
        if ops:
            conn.execute(store.t("ops").insert(), ops)
        if layers:
            conn.execute(store.t("layers").insert(), [{"run_id": run_id, **r} for r in layers])
        if conformance:
            conn.execute(store.t("conformance").insert(), [{"run_id": run_id, **r} for r in conformance])
    return {"run": key, "added": True, "rows": n, "ops": len(ops), "layers": len(layers),
            "conformance": len(conformance), "kind": kind.describe()}


def row_values(row: Mapping[str, Any]) -> tuple[dict[str, Any], list[float]]:
    """A benchmark row as the ``rows`` table holds it (its identity key and hash, the columns a series is drawn from,
    the row as JSON), and its per-process images/sec (one sample for a row of one process)."""
    ident_text = json.dumps(list(identity.match_key(row)), default=str)
    procs = record.process_images_per_sec(row)
    values = {"identity_hash": hashlib.sha256(ident_text.encode()).hexdigest(), "identity": ident_text,
              "label": row.get("label"), "source": row.get("source"), "mode": row.get("mode"),
              "precision": row.get("precision"), "backend": row.get("backend"), "batch_size": row.get("batch_size"),
              "status": row.get("status"), "images_per_sec": _float(row.get("images_per_sec")),
              "mfu": _float(row.get("mfu")), "processes": len(procs) or 1, "row": json.dumps(row, default=str)}
    samples = procs or ([float(row["images_per_sec"])] if _float(row.get("images_per_sec")) else [])
    return values, samples


def push_records(store: Store, outputs: str | Path) -> list[dict[str, Any]]:
    """The committed records (:func:`resnet_lab.runs.record.reference_root`: one per host kind) pushed where the
    store lacks them, so that a new store starts with every host kind's record as its first run (never a
    hand copy). A record already there costs a read of its provenance.json; one that cannot be read is left
    out, its reason in the result (``{"record", "added" | "skipped"}`` per record)."""
    import sqlalchemy as sa

    root = record.reference_root(Path(outputs))
    done = []
    for folder in record.reference_records(root) if root else []:
        try:
            key = run_key(record.read_provenance(folder, "record"), folder)
            with store.engine.connect() as conn:
                there = conn.execute(sa.select(store.t("runs").c.id).where(store.t("runs").c.run_key == key)).scalar()
            done.append({"record": str(folder), "added": False} if there is not None else
                        {"record": str(folder), **push(store, folder, committed=True)})
        except UsageError as exc:
            done.append({"record": str(folder), "added": False, "skipped": str(exc)})
    return done


def _results_03(folder: Path) -> dict[str, Any] | None:
    """Notebook 03's ``results.json`` in a run folder (what its summary quotes), or None."""
    try:
        got = json.loads((folder / RESULTS_03).read_text())
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) else None


def push_new(store: Store, folder: str | Path) -> dict[str, Any]:
    """:func:`push` where the store lacks the run: a run already there costs a read of its provenance.json."""
    import sqlalchemy as sa

    folder = Path(folder)
    key = run_key(record.read_provenance(folder, "run"), folder)
    with store.engine.connect() as conn:
        if conn.execute(sa.select(store.t("runs").c.id).where(store.t("runs").c.run_key == key)).scalar() is not None:
            return {"run": key, "added": False, "rows": 0}
    return push(store, folder)


def _float(v: Any) -> float | None:
    try:
        return float(v) if v not in (None, "") else None
    except (TypeError, ValueError):
        return None


# ------------------------------------------------------------------------------------------ reading
def kinds(store: Store) -> list[dict[str, Any]]:
    """Every host kind with its runs' count, newest run first within it."""
    import sqlalchemy as sa

    k, r = store.t("host_kinds"), store.t("runs")
    q = (sa.select(k.c.id, k.c.description, k.c.slug, k.c.facts_hash, sa.func.count(r.c.id).label("runs"),
                   sa.func.max(r.c.started_at).label("newest"))
         .select_from(k.outerjoin(r, r.c.host_kind_id == k.c.id)).group_by(k.c.id).order_by(k.c.id))
    with store.engine.connect() as conn:
        return [dict(m) for m in conn.execute(q).mappings()]


def runs(store: Store, kind_id: int | None = None, params_name: str | None = None) -> list[dict[str, Any]]:
    """The runs (oldest first): key, name, params, commit and its ordinal, kind, times, status."""
    import sqlalchemy as sa

    r, c = store.t("runs"), store.t("commits")
    q = (sa.select(r.c.id, r.c.run_key, r.c.name, r.c.params_name, r.c.host_kind_id, r.c.started_at,
                   r.c.finished_at, r.c.status, r.c.dirty, c.c.sha, c.c.ordinal)
         .select_from(r.outerjoin(c, r.c.commit_id == c.c.id)).order_by(r.c.started_at, r.c.id))
    if kind_id is not None:
        q = q.where(r.c.host_kind_id == kind_id)
    if params_name is not None:
        q = q.where(r.c.params_name == params_name)
    with store.engine.connect() as conn:
        return [dict(m) for m in conn.execute(q).mappings()]


def rows_of(store: Store, run_ids: list[int]) -> list[dict[str, Any]]:
    """The rows of those runs, each with its per-process samples."""
    import sqlalchemy as sa

    if not run_ids:
        return []
    rows, samples = store.t("rows"), store.t("samples")
    with store.engine.connect() as conn:
        got = [dict(m) for m in conn.execute(sa.select(rows).where(rows.c.run_id.in_(run_ids))
                                             .order_by(rows.c.run_id, rows.c.id)).mappings()]
        by_row: dict[int, list[float]] = {}
        for m in conn.execute(sa.select(samples).where(samples.c.row_id.in_([g["id"] for g in got]))
                              .order_by(samples.c.row_id, samples.c.process)).mappings():
            by_row.setdefault(m["row_id"], []).append(float(m["images_per_sec"]))
    for g in got:
        g["samples"] = by_row.get(g["id"], [])
    return got


def stored_runs(store: Store) -> Iterator[tuple[dict[str, Any], record.HostKind, list[dict[str, Any]], set | None]]:
    """Every run as history reads it, oldest first: (the run: name, key, ``started_at``, ``sha``, ``committed``,
    ``collected_at``), its host kind, its rows (as pushed: ``bench/schema.py``'s fields) and the identities of the
    rows 03's summary quotes (None where the store predates ``rows.quoted``)."""
    import sqlalchemy as sa

    r, c, k, rows = store.t("runs"), store.t("commits"), store.t("host_kinds"), store.t("rows")
    with store.engine.connect() as conn:
        kinds_ = {m["id"]: stored_kind(m) for m in conn.execute(sa.select(k)).mappings()}
        found = [dict(m) for m in conn.execute(
            sa.select(r.c.id, r.c.run_key, r.c.name, r.c.started_at, r.c.committed, r.c.environment,
                      r.c.host_kind_id, c.c.sha).select_from(r.outerjoin(c, r.c.commit_id == c.c.id))
            .order_by(r.c.started_at, r.c.id)).mappings()]
        by_run: dict[int, list[tuple[dict[str, Any], Any]]] = {}
        for m in conn.execute(sa.select(rows.c.run_id, rows.c.row, rows.c.quoted).order_by(rows.c.id)).mappings():
            by_run.setdefault(m["run_id"], []).append((json.loads(m["row"]), m["quoted"]))
    for run in found:
        pairs = by_run.get(run["id"], [])
        run["collected_at"] = (json.loads(run.pop("environment") or "{}") or {}).get("collected_at")
        yield (run, kinds_[run["host_kind_id"]], [p[0] for p in pairs],
               {identity.match_key(p[0]) for p in pairs if p[1]} if any(p[1] is not None for p in pairs) else None)


def find_run(store: Store, text: str) -> dict[str, Any]:
    """A run by its key, its folder's name or a run folder (whose key is read from its provenance)."""
    p = Path(text)
    key = run_key(record.read_provenance(p), p) if (p / "provenance.json").is_file() else text
    for r in reversed(runs(store)):
        if r["run_key"] == key or r["name"] == key:
            return r
    raise UsageError(f"run: '{text}' is not in the store {store.shown} (`resnet-lab store push` it first; "
                     "`resnet-lab store list` names what is there)")
