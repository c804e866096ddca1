"""The job service's durable state: one SQLite file in WAL mode.

Every state change is one short transaction, committed before the HTTP answer or the next
scheduling step, so a ``kill -9`` loses nothing that a client was told. With
``synchronous=NORMAL`` a committed WAL transaction survives the death of the process (only a
power loss or OS crash can roll back the last few); ``durable=True`` selects ``FULL``.

The store is synchronous and not thread-safe on its own: the service calls it from one worker
thread at a time (``anyio.to_thread.run_sync`` with a limiter of 1).

Every job belongs to an owner: a digest of the API key that submitted it (never the key).
Reads, cancels, idempotency keys and queue quotas are all scoped by owner. A database from
before owners existed is migrated at open; its jobs get an owner no key has (they stay until
retention deletes them, invisible to clients).

At open the file is checked (``PRAGMA quick_check``): a file that is not a database, or one
with damaged pages, is refused with :class:`~openmle.errors.SandboxError` saying what to do,
rather than starting healthy and failing every request.
"""

from __future__ import annotations

import fcntl
import json
import sqlite3
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attrs import define, field, frozen

from openmle.errors import SandboxError

__all__ = ["LEGACY_OWNER", "JobRow", "JobStore", "QuotaExceeded", "Status"]


class QuotaExceeded(Exception):
    """The owner already has its quota of queued jobs."""

    def __init__(self, queued: int) -> None:
        super().__init__(f"{queued} jobs queued")
        self.queued = queued


class Status:
    """Job statuses on the wire (the released clients' vocabulary)."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED})


LEGACY_OWNER = "-legacy-"
"""Owner of jobs stored before owners existed: matches no API key."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    idempotency_key TEXT,
    request_hash TEXT NOT NULL,
    name TEXT,
    pool TEXT NOT NULL,
    priority INTEGER NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    started_at REAL,
    completed_at REAL,
    result TEXT,
    detail TEXT NOT NULL DEFAULT '',
    UNIQUE (owner, idempotency_key)
);
CREATE INDEX IF NOT EXISTS jobs_queue ON jobs (status, pool, priority, seq);
CREATE INDEX IF NOT EXISTS jobs_owner ON jobs (owner, status);
"""

_COLUMNS = (
    "seq, id, idempotency_key, request_hash, name, pool, priority, spec, status, attempts,"
    " created_at, started_at, completed_at, result, detail"
)


@frozen(kw_only=True)
class JobRow:
    """One job as stored."""

    seq: int
    id: str
    owner: str
    idempotency_key: str | None
    request_hash: str
    name: str | None
    pool: str
    priority: int
    spec: Mapping[str, Any]
    status: str
    attempts: int
    created_at: float
    started_at: float | None
    completed_at: float | None
    result: Mapping[str, Any] | None
    detail: str

    @classmethod
    def from_sql(cls, row: sqlite3.Row) -> JobRow:
        d = dict(row)
        d["spec"] = json.loads(d["spec"])
        d["result"] = None if d["result"] is None else json.loads(d["result"])
        return cls(**d)


@define(eq=False)
class JobStore:
    """Jobs and results in one SQLite database; only one service may open a file at a time.

    Args:
        path: the database file (created with its parent directory if missing).
        durable: ``synchronous=FULL`` (survives power loss) instead of ``NORMAL``.

    Raises:
        SandboxError: another service already holds ``path`` open.
    """

    path: Path
    durable: bool = False
    _db: sqlite3.Connection = field(init=False, repr=False)
    _lock: Any = field(default=None, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = open(f"{self.path}.lock", "w")  # noqa: SIM115 - held for the store's life
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise SandboxError(
                f"another job service already uses {self.path}; stop it or pass another --db"
            ) from None
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA busy_timeout=5000")
            self._check_integrity()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={'FULL' if self.durable else 'NORMAL'}")
            self._migrate()
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise SandboxError(
                f"the job database {self.path} is not usable ({exc}); move it aside (keep it "
                "for inspection) and start again with a fresh --db"
            ) from None
        except BaseException:
            self.close()
            raise

    def _check_integrity(self) -> None:
        rows = self._db.execute("PRAGMA quick_check").fetchall()
        problems = [str(r[0]) for r in rows if str(r[0]) != "ok"]
        if problems:
            raise sqlite3.DatabaseError(
                f"integrity check failed: {'; '.join(problems[:3])}"
                + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
            )

    def _migrate(self) -> None:
        """Rebuild a ``jobs`` table from before owners (global idempotency keys)."""
        cols = [r[1] for r in self._db.execute("PRAGMA table_info(jobs)").fetchall()]
        if not cols or "owner" in cols:
            return
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("ALTER TABLE jobs RENAME TO jobs_before_owners")
            self._db.execute("DROP INDEX IF EXISTS jobs_queue")
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self._db.execute(stmt)
            self._db.execute(
                f"INSERT INTO jobs (owner, {_COLUMNS})"
                f" SELECT ?, {_COLUMNS} FROM jobs_before_owners",
                (LEGACY_OWNER,),
            )
            self._db.execute("DROP TABLE jobs_before_owners")

    def close(self) -> None:
        """Close the database and release the file lock (idempotent)."""
        try:
            db = getattr(self, "_db", None)
            if db is not None:
                db.close()
        finally:
            if self._lock is not None and not self._lock.closed:
                fcntl.flock(self._lock, fcntl.LOCK_UN)
                self._lock.close()

    # ------------------------------------------------------------------------------------
    def insert(
        self,
        *,
        idempotency_key: str | None,
        request_hash: str,
        name: str | None,
        pool: str,
        priority: int,
        spec: Mapping[str, Any],
        max_queued: int,
        owner: str = "",
        max_queued_per_owner: int | None = None,
    ) -> tuple[JobRow | None, bool]:
        """Insert a queued job, or return the owner's job with the same idempotency key.

        Returns ``(row, created)``; ``(None, False)`` when the queue already holds
        ``max_queued`` jobs (and the key is new).

        Raises:
            QuotaExceeded: ``owner`` already has ``max_queued_per_owner`` jobs queued.
        """
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            if idempotency_key is not None:
                old = self._db.execute(
                    "SELECT * FROM jobs WHERE owner = ? AND idempotency_key = ?",
                    (owner, idempotency_key),
                ).fetchone()
                if old is not None:
                    return JobRow.from_sql(old), False
            if max_queued_per_owner is not None:
                (mine,) = self._db.execute(
                    "SELECT COUNT(*) FROM jobs WHERE owner = ? AND status = ?",
                    (owner, Status.QUEUED),
                ).fetchone()
                if mine >= max_queued_per_owner:
                    raise QuotaExceeded(int(mine))
            (queued,) = self._db.execute(
                "SELECT COUNT(*) FROM jobs WHERE status = ?", (Status.QUEUED,)
            ).fetchone()
            if queued >= max_queued:
                return None, False
            job_id = uuid.uuid4().hex
            self._db.execute(
                "INSERT INTO jobs (id, owner, idempotency_key, request_hash, name, pool, priority,"
                " spec, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    job_id,
                    owner,
                    idempotency_key,
                    request_hash,
                    name,
                    pool,
                    priority,
                    json.dumps(dict(spec)),
                    Status.QUEUED,
                    time.time(),
                ),
            )
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return JobRow.from_sql(row), True

    def get(self, job_id: str, owner: str | None = None) -> JobRow | None:
        """The job with ``job_id`` (of ``owner`` when given: another's is None, as missing)."""
        if owner is None:
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        else:
            row = self._db.execute(
                "SELECT * FROM jobs WHERE id = ? AND owner = ?", (job_id, owner)
            ).fetchone()
        return None if row is None else JobRow.from_sql(row)

    def claim_next(self, pool: str, *, age_s: float | None = None) -> JobRow | None:
        """Mark the next queued job of ``pool`` running and return it.

        The next job has the smallest priority number, FIFO among equals; with ``age_s``,
        a job's priority number drops by one for every ``age_s`` seconds it has waited (so
        low priorities never starve).
        """
        now = time.time()
        order = "priority, seq"
        args: tuple[Any, ...] = (Status.RUNNING, now, Status.QUEUED, pool)
        if age_s is not None:
            order = "priority - CAST((? - created_at) / ? AS INTEGER), seq"
            args = (*args, now, age_s)
        row = self._db.execute(
            "UPDATE jobs SET status = ?, started_at = ?, attempts = attempts + 1"
            " WHERE seq = (SELECT seq FROM jobs WHERE status = ? AND pool = ?"
            f" ORDER BY {order} LIMIT 1) RETURNING *",
            args,
        ).fetchone()
        return None if row is None else JobRow.from_sql(row)

    def finish(
        self, job_id: str, status: str, result: Mapping[str, Any] | None, detail: str = ""
    ) -> bool:
        """Record the terminal state of a running job; False if it was not running."""
        cur = self._db.execute(
            "UPDATE jobs SET status = ?, result = ?, detail = ?, completed_at = ?"
            " WHERE id = ? AND status = ?",
            (
                status,
                None if result is None else json.dumps(dict(result)),
                detail,
                time.time(),
                job_id,
                Status.RUNNING,
            ),
        )
        return cur.rowcount == 1

    def cancel_queued(self, job_id: str, owner: str | None = None) -> bool:
        """Cancel a job that has not started; False if it is not queued (or not ``owner``'s)."""
        cur = self._db.execute(
            "UPDATE jobs SET status = ?, completed_at = ?, detail = ? WHERE id = ? AND status = ?"
            " AND (? IS NULL OR owner = ?)",
            (
                Status.CANCELLED,
                time.time(),
                "cancelled before it started",
                job_id,
                Status.QUEUED,
                owner,
                owner,
            ),
        )
        return cur.rowcount == 1

    def recover(self, *, max_attempts: int) -> tuple[int, list[JobRow]]:
        """Apply the restart rule to jobs left ``running`` by a crash.

        A job that has been started fewer than ``max_attempts`` times goes back to the queue
        (keeping its priority and place); the others are returned so the caller can mark them
        failed. Returns ``(requeued_count, exhausted_rows)``.
        """
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            cur = self._db.execute(
                "UPDATE jobs SET status = ?, started_at = NULL WHERE status = ? AND attempts < ?",
                (Status.QUEUED, Status.RUNNING, max_attempts),
            )
            requeued = cur.rowcount
            rows = self._db.execute(
                "SELECT * FROM jobs WHERE status = ?", (Status.RUNNING,)
            ).fetchall()
        return requeued, [JobRow.from_sql(r) for r in rows]

    def release_running(self) -> int:
        """Put every running job back in the queue without counting its interrupted start.

        Called on a graceful stop, after every run was cancelled; returns how many went back.
        """
        cur = self._db.execute(
            "UPDATE jobs SET status = ?, started_at = NULL, attempts = MAX(attempts - 1, 0)"
            " WHERE status = ?",
            (Status.QUEUED, Status.RUNNING),
        )
        return cur.rowcount

    def purge(self, before: float) -> int:
        """Delete finished jobs that ended before ``before`` (epoch seconds); returns the count."""
        cur = self._db.execute(
            "DELETE FROM jobs WHERE status IN (?, ?, ?) AND completed_at < ?",
            (*sorted(Status.TERMINAL), before),
        )
        return cur.rowcount

    def counts(self) -> dict[tuple[str, str], int]:
        """Job counts by ``(pool, status)`` for queued and running jobs."""
        rows = self._db.execute(
            "SELECT pool, status, COUNT(*) FROM jobs WHERE status IN (?, ?) GROUP BY pool, status",
            (Status.QUEUED, Status.RUNNING),
        ).fetchall()
        return {(r[0], r[1]): int(r[2]) for r in rows}
