"""Private servers for the chaos test: the nemesis restarts them, so they are never the
machine's shared ones (other tests run against those at the same time).

- PostgreSQL: `initdb` into a temporary folder (as the `postgres` user when run as root:
  initdb refuses root), `pg_ctl` on a free port. A restart is `pg_ctl stop -m immediate`
  (a crash: WAL recovery on start), so what was committed survives, as on a real server.
- Redis: `redis-server --save "" --appendonly no` on a free port. A restart loses every
  key (SPEC 7.1 item 16: every host is refused until `store repair`).
- MariaDB: a database of the run's own on the shared server (never restarted).
- SQLite: a file all hosts of the cell share.
"""

import glob
import os
import shutil
import socket
import subprocess
import time

# Servers carry this marker, not the run's, so the leftover check does not count them.
SERVER_ENV = {k: v for k, v in os.environ.items() if not k.startswith("CHAOS_")}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def wait_until(probe, limit, what):
    """Polls `probe` (an observable fact) until it holds; raises after `limit` seconds."""
    end = time.monotonic() + limit
    while not probe():
        if time.monotonic() > end:
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.05)


def pg_bin():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


class Postgres:
    """A PostgreSQL of the run's own; `None` from `make` when this machine cannot start one."""

    def __init__(self, root):
        self.bin = pg_bin()
        self.dir = os.path.join(root, "server-postgres")
        self.port = free_port()
        self.user = None
        os.makedirs(self.dir)
        if os.geteuid() == 0:
            self.user = "postgres"
            shutil.chown(self.dir, self.user)
        self._as_owner([os.path.join(self.bin, "initdb"), "-D", os.path.join(self.dir, "data"),
                        "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"])
        self.start()

    @staticmethod
    def make(root):
        if not pg_bin():
            return None, "initdb is not installed"
        try:
            return Postgres(root), None
        except subprocess.CalledProcessError as e:
            return None, f"{e.cmd[-1] if e.cmd else e}: {(e.stderr or b'').decode(errors='replace').strip()[:300]}"
        except (RuntimeError, OSError, LookupError) as e:
            return None, str(e)

    def _as_owner(self, argv, check=True):
        if self.user:
            argv = ["runuser", "-u", self.user, "--"] + argv
        return subprocess.run(argv, env=SERVER_ENV, cwd=self.dir, check=check,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self):
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._as_owner([os.path.join(self.bin, "pg_ctl"), "-D", os.path.join(self.dir, "data"),
                        "-l", os.path.join(self.dir, "log"), "-o", opts, "-w", "start"])
        wait_until(lambda: listening(self.port), 30, "PostgreSQL to listen")

    def crash(self):
        """Stops it as a crash would (immediate: no checkpoint), keeping its data."""
        self._as_owner([os.path.join(self.bin, "pg_ctl"), "-D", os.path.join(self.dir, "data"),
                        "-m", "immediate", "-w", "stop"], check=False)

    def stop(self):
        self.crash()

    def url(self, port=None, db="postgres"):
        return f"postgres://postgres@127.0.0.1:{port or self.port}/{db}?sslmode=disable"

    def admin_argv(self):
        return ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                "-p", str(self.port), "-U", "postgres", "-d", "postgres"]

    def query_json(self, sql):
        """Rows of `sql` as dicts (one `row_to_json` per line)."""
        out = subprocess.run(self.admin_argv() + ["-c", f"SELECT row_to_json(q) FROM ({sql}) q"],
                             env=SERVER_ENV, check=True, capture_output=True, text=True).stdout
        import json
        return [json.loads(line) for line in out.splitlines() if line.strip()]


class Redis:
    def __init__(self, root):
        self.dir = os.path.join(root, "server-redis")
        os.makedirs(self.dir)
        self.port = free_port()
        self.proc = None
        self.start()

    @staticmethod
    def make(root):
        if not shutil.which("redis-server"):
            return None, "redis-server is not installed"
        try:
            return Redis(root), None
        except (RuntimeError, OSError) as e:
            return None, str(e)

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            env=SERVER_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        wait_until(lambda: listening(self.port), 30, "redis-server to listen")

    def crash(self):
        """SIGKILL: everything it held is gone (no RDB, no AOF)."""
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def stop(self):
        self.crash()

    def url(self, port=None):
        return f"redis://127.0.0.1:{port or self.port}/0"


class MariaDb:
    """A database of this run's own on the shared MariaDB (never restarted by the nemesis)."""

    def __init__(self, name, host="127.0.0.1", port=3306):
        self.name, self.host, self.port = name, host, port

    @staticmethod
    def make(name):
        if not shutil.which("mysql"):
            return None, "the mysql client is not installed"
        db = MariaDb(name)
        r = db._mysql(f"CREATE DATABASE {name}", db_name=None, check=False)
        if r.returncode != 0:
            return None, r.stderr.strip() or "mysql failed"
        return db, None

    def _mysql(self, sql, db_name="self", check=True):
        argv = ["mysql", "-h", self.host, "-P", str(self.port), "-u", "root", "-B", "-N",
                "--raw", "-e", sql]
        if db_name:
            argv.insert(1, self.name)
        return subprocess.run(argv, env=SERVER_ENV, check=check, capture_output=True, text=True)

    def url(self, port=None):
        return f"mysql://root@127.0.0.1:{port or self.port}/{self.name}"

    def query_json(self, select_json):
        import json
        out = self._mysql(select_json).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def stop(self):
        self._mysql(f"DROP DATABASE IF EXISTS {self.name}", db_name=None, check=False)
