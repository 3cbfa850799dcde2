"""A small threaded HTTP job server with a persistent queue."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator, Optional

log = logging.getLogger(__name__)

DEFAULT_PORT = 8080
MAX_ATTEMPTS = 5
RETRY_BACKOFF = 1.5


class JobError(Exception):
    """Raised when a job cannot be stored or run."""


@dataclass
class Job:
    """One unit of work."""

    id: int
    kind: str
    payload: dict = field(default_factory=dict)
    attempts: int = 0
    done: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {
                "id": self.id,
                "kind": self.kind,
                "payload": self.payload,
                "attempts": self.attempts,
                "done": self.done,
            }
        )

    @classmethod
    def from_row(cls, row: tuple) -> "Job":
        job_id, kind, payload, attempts, done = row
        return cls(job_id, kind, json.loads(payload), attempts, bool(done))


class JobQueue:
    """A FIFO of jobs kept in SQLite, safe for use from many threads."""

    schema = """
        CREATE TABLE IF NOT EXISTS jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            done INTEGER NOT NULL DEFAULT 0
        )
    """

    def __init__(self, path: str = ":memory:") -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute(self.schema)
        self._cond = threading.Condition(self._lock)

    def push(self, kind: str, payload: dict) -> Job:
        with self._cond:
            cur = self._db.execute(
                "INSERT INTO jobs (kind, payload) VALUES (?, ?)",
                (kind, json.dumps(payload)),
            )
            self._db.commit()
            self._cond.notify()
            return Job(cur.lastrowid, kind, payload)

    def pop(self, timeout: Optional[float] = None) -> Optional[Job]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                row = self._db.execute(
                    "SELECT id, kind, payload, attempts, done FROM jobs "
                    "WHERE done = 0 AND attempts < ? ORDER BY id LIMIT 1",
                    (MAX_ATTEMPTS,),
                ).fetchone()
                if row is not None:
                    job = Job.from_row(row)
                    self._db.execute(
                        "UPDATE jobs SET attempts = attempts + 1 WHERE id = ?", (job.id,)
                    )
                    self._db.commit()
                    job.attempts += 1
                    return job
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def finish(self, job: Job) -> None:
        with self._lock:
            self._db.execute("UPDATE jobs SET done = 1 WHERE id = ?", (job.id,))
            self._db.commit()

    def pending(self) -> Iterator[Job]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, kind, payload, attempts, done FROM jobs WHERE done = 0"
            ).fetchall()
        for row in rows:
            yield Job.from_row(row)


Handler = Callable[[Job], None]


class Worker(threading.Thread):
    """Runs jobs from a queue with the handler registered for their kind."""

    def __init__(self, queue: JobQueue, handlers: dict[str, Handler]) -> None:
        super().__init__(daemon=True)
        self.queue = queue
        self.handlers = handlers
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            job = self.queue.pop(timeout=0.5)
            if job is None:
                continue
            handler = self.handlers.get(job.kind)
            if handler is None:
                log.warning("no handler for %s", job.kind)
                continue
            try:
                handler(job)
            except Exception:  # noqa: BLE001 - a job must not kill the worker
                log.exception("job %d failed (attempt %d)", job.id, job.attempts)
                time.sleep(RETRY_BACKOFF ** job.attempts)
            else:
                self.queue.finish(job)

    def stop(self) -> None:
        self._stop_event.set()


def make_handler(queue: JobQueue) -> type[BaseHTTPRequestHandler]:
    class JobHandler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            job = queue.push(body.get("kind", "noop"), body.get("payload", {}))
            self._reply(201, job.to_json())

        def do_GET(self) -> None:
            jobs = [json.loads(j.to_json()) for j in queue.pending()]
            self._reply(200, json.dumps(jobs))

        def _reply(self, status: int, text: str) -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return JobHandler


def serve(port: int = DEFAULT_PORT, workers: int = 2) -> None:
    queue = JobQueue()
    handlers: dict[str, Handler] = {"noop": lambda job: None, "log": lambda job: log.info("%s", job.payload)}
    pool = [Worker(queue, handlers) for _ in range(workers)]
    for w in pool:
        w.start()
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(queue))
    try:
        server.serve_forever()
    finally:
        for w in pool:
            w.stop()
        server.server_close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    serve()
