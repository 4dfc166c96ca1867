"""A throw-away PostgreSQL 15 server for the tests: started once per test session, stopped at exit.

`server()` starts it on first use (Debian's binaries, `/usr/lib/postgresql/15/bin`, or
`CYBER_AGENT_PG_BIN`): `initdb` into a fresh temp directory, listening on a unix socket in that
directory only (`listen_addresses=''`), `fsync=off`, trust authentication. `initdb` refuses to run
as root, so as root the directory is given to the `postgres` user and the commands run through
`runuser -u postgres`. Each test gets its own schema (`schema_url`), so tests never see each
other's rows. `available()` says whether the binaries are here; with `CYBER_AGENT_REQUIRE_POSTGRES=1`
(set by `.ci/run`) a missing server is an error, never a skip.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import quote

__all__ = ["PgServer", "available", "required", "schema_for", "server"]

PG_BIN = Path(os.environ.get("CYBER_AGENT_PG_BIN", "/usr/lib/postgresql/15/bin"))
_lock = threading.Lock()
_server: PgServer | None = None


def available() -> bool:
    """True when the PostgreSQL server binaries and psycopg are installed."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return False
    return all((PG_BIN / name).exists() for name in ("initdb", "pg_ctl", "postgres"))


def required() -> bool:
    """True when the tests must run on PostgreSQL (CI): missing binaries fail instead of skipping."""
    return os.environ.get("CYBER_AGENT_REQUIRE_POSTGRES", "") not in ("", "0")


class PgServer:
    """One PostgreSQL cluster in a temp directory, reachable on a unix socket there."""

    def __init__(self, root: Path | None = None, port: int | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="cyber-agent-pg-")) if root is None else root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.data = self.root / "data"
        self.socket_dir = self.root
        self.port = port or 5432 + int.from_bytes(os.urandom(2), "big") % 20000
        self._as_root = os.geteuid() == 0
        if self._as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self.user = "postgres" if self._as_root else os.environ.get("USER", "postgres")

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(PG_BIN / args[0]), *args[1:]]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)

    def _checked(self, *args: str) -> None:
        done = self._run(*args)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr[-2000:] or done.stdout[-2000:]}")

    def init(self) -> None:
        """Create the cluster."""
        self._checked("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8",
                      "--no-sync", "--locale=C")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nlisten_addresses = ''\nunix_socket_directories = '{self.socket_dir}'\nport = {self.port}\n"
                       "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 300\n"
                       "shared_buffers = 64MB\n")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._checked("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`fast` ends every session; `immediate` is a crash)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self) -> None:
        """Stop and start again: every open connection is dropped."""
        self.stop()
        self.start()

    def destroy(self) -> None:
        """Stop the server and remove its directory."""
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def url(self) -> str:
        """A `postgresql://` URL of the `postgres` database over the unix socket."""
        return f"postgresql://{self.user}@/postgres?host={quote(str(self.socket_dir), safe='')}&port={self.port}"

    def schema_url(self, schema: str) -> str:
        """The URL of a store kept in its own schema."""
        return f"{self.url}&schema={schema}"


def server() -> PgServer:
    """The session's server, started on first use and stopped when the interpreter exits."""
    global _server
    with _lock:
        if _server is None:
            if not available():
                raise RuntimeError(f"PostgreSQL server binaries are not in {PG_BIN} (or psycopg is missing); "
                                   "install them with `apt-get install -y postgresql-15` and "
                                   "`pip install 'cyber-agent[postgres]'`")
            started = PgServer()
            started.init()
            started.start()
            atexit.register(started.destroy)
            _server = started
        return _server


def schema_for(key: str) -> str:
    """A schema name unique to `key` (e.g. a test's temp directory)."""
    return "t_" + hashlib.sha1(key.encode()).hexdigest()[:16]


def main(argv: list[str]) -> int:
    """`python tests/pg_server.py start DIR` starts a server kept in DIR and prints its URL; `stop DIR` stops it."""
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python tests/pg_server.py start|stop DIR", file=sys.stderr)
        return 2
    root = Path(argv[1])
    port_file = root / "port"
    if argv[0] == "stop":
        if port_file.exists():
            PgServer(root, int(port_file.read_text())).stop()
        return 0
    if port_file.exists():
        pg = PgServer(root, int(port_file.read_text()))
    else:
        pg = PgServer(root)
        pg.init()
        port_file.write_text(str(pg.port))
    if (pg.data / "postmaster.pid").exists():
        print(f"already running: {pg.url}")
        return 0
    pg.start()
    print(f"export CYBER_AGENT_STORE='{pg.url}'")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
