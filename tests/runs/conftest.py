"""A real PostgreSQL for the store's tests: a throwaway cluster on a local socket, started here, stopped at the end.

Debian's ``postgresql`` package (``.ci/run`` installs it) gives ``initdb`` and ``pg_ctl`` under
``/usr/lib/postgresql/<version>/bin``; PostgreSQL refuses to run as root, so as root the cluster runs as the
package's ``postgres`` user. No TCP port is opened (``listen_addresses=''``): two pytest workers each start their
own. Without the binaries the PostgreSQL cases skip, unless ``RESNET_LAB_REQUIRE_POSTGRES=1`` (CI) makes that a
failure.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REQUIRE = os.environ.get("RESNET_LAB_REQUIRE_POSTGRES") == "1"


def _bindir() -> Path | None:
    """The server's own binaries: Debian's versioned folder (its PATH holds wrappers that want a configured cluster),
    else wherever ``initdb`` is on PATH."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if versions:
        return Path(versions[-1]).parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


@pytest.fixture(scope="session")
def pg_url():
    """A SQLAlchemy URL of the fresh cluster's ``postgres`` database, or a skip with the reason."""
    bindir = _bindir()
    if bindir is None:
        if REQUIRE:
            pytest.fail("RESNET_LAB_REQUIRE_POSTGRES=1 but no PostgreSQL server binaries (initdb, pg_ctl) here")
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql): the store's PostgreSQL cases skip")
    root = Path(tempfile.mkdtemp(prefix="resnet-lab-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    prefix: list[str] = []
    if os.getuid() == 0:  # the server will not run as root: as the package's user, in a folder it owns
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            (pytest.fail if REQUIRE else pytest.skip)("PostgreSQL will not run as root and there is no 'postgres' user")
        for p in (root, sock):
            os.chown(p, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run([*prefix, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync",
                    "-E", "UTF8"], check=True, capture_output=True, env=env)
    opts = f"-c listen_addresses='' -c unix_socket_directories={sock} -c fsync=off -c max_connections=40"
    start = subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-w", "-t", "60",
                            "-l", str(root / "server.log"), "start"], capture_output=True, text=True, env=env)
    if start.returncode:
        log = (root / "server.log").read_text() if (root / "server.log").exists() else ""
        pytest.fail(f"PostgreSQL did not start: {start.stderr.strip()} {log[-500:]}")
    try:
        yield f"postgresql://postgres@/postgres?host={sock}"  # each test makes its own database (pg_store)
    finally:
        subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, env=env)
        shutil.rmtree(root, ignore_errors=True)


_N = [0]


@pytest.fixture
def pg_store(pg_url) -> str:
    """A new, empty database on the session's PostgreSQL, for one test."""
    import sqlalchemy as sa

    _N[0] += 1
    name = f"t{os.getpid()}_{_N[0]}"
    engine = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return pg_url.replace("/postgres?", f"/{name}?")
