"""Worker processes of ``corpus build --workers N``: one forked process per shard, at most N at a time.

A worker runs the same seeded function as the command's process (the files are byte for byte the
same), shares the sequence and tokenizer copy-on-write and sends back only the shard's ``ShardInfo``.
SIGINT and SIGTERM unwind workers silently (:func:`genolong.core.interrupts.handled`); the parent
terminates and waits for them, then ends with the command's one line (130 or 143)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, wait

from genolong.core import interrupts
from genolong.core.errors import UserError
from genolong.runtime.launch import processes_per_node


def available_cores() -> int:
    """CPU cores this process may run on (its affinity), shared by the ranks of a node when a launcher
    (torchrun: ``LOCAL_WORLD_SIZE``; SLURM: ``SLURM_NTASKS_PER_NODE``) starts several per node."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // processes_per_node())


@contextlib.contextmanager
def _forking() -> Iterator[None]:
    """Around a fork: SIGINT/SIGTERM held back (a handler raising inside the interpreter's fork hooks would
    be lost; the worker unblocks them first thing), and tokenizers told not to start threads in the worker
    (one core per worker, and no warning about a fork after parallelism)."""
    parallelism = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.HANDLED)
    try:
        yield
    finally:
        os.environ.pop("TOKENIZERS_PARALLELISM", None)
        if parallelism is not None:
            os.environ["TOKENIZERS_PARALLELISM"] = parallelism
        signal.pthread_sigmask(signal.SIG_UNBLOCK, interrupts.HANDLED)


def _child(build: Callable, sender: Connection) -> None:
    """A worker's life: build, send the result (or the error) and exit; an interrupt exits quietly."""
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, interrupts.HANDLED)
        try:
            sender.send(build(None))
        except KeyboardInterrupt as interrupt:
            os._exit(interrupts.exit_code(interrupt))
        except Exception as err:  # noqa: BLE001 - the parent raises it
            sender.send(err if _picklable(err) else RuntimeError(str(err)))
    finally:
        sender.close()


def _picklable(err: Exception) -> bool:
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:  # noqa: BLE001 - any failure means: send its text instead
        return False
    return True


class ShardPool:
    """Builds shards in this process (``workers == 1``) or in up to ``workers`` forked processes (left by
    an exception, terminates them); ``progress``: a tqdm bar advanced by bp x passes, or None."""

    def __init__(self, workers: int, progress=None):
        self.workers, self.progress = workers, progress
        self.running: dict[Connection, tuple[multiprocessing.Process, object, str, int]] = {}
        self.results: dict[object, object] = {}

    def submit(self, key, name: str, build: Callable, amount: int) -> None:
        """Build shard ``key`` (``name`` for messages): ``build(progress)`` returns its ShardInfo;
        ``amount``: its progress in bp, all passes."""
        if self.workers == 1:
            self.results[key] = build(self.progress)
            return
        while len(self.running) >= self.workers:
            self._collect()
        receiver, sender = multiprocessing.Pipe(duplex=False)
        process = multiprocessing.get_context("fork").Process(target=_child, args=(build, sender), daemon=True)
        with _forking():
            process.start()
            self.running[receiver] = (process, key, name, amount)
            sender.close()  # the worker holds the other end: EOF here when it dies

    def result(self, key):
        """The ShardInfo of shard ``key``, once built."""
        while key not in self.results:
            self._collect()
        return self.results[key]

    def _collect(self) -> None:
        """Wait for one running worker to finish; raise its error, or one line if it died."""
        for receiver in wait(list(self.running)):
            process, key, name, amount = self.running.pop(receiver)
            try:
                outcome = receiver.recv()
            except EOFError:
                process.join()
                raise UserError(f"the worker building shard {name} died (exit status {process.exitcode})",
                                hint="out of memory? try fewer --workers") from None
            finally:
                receiver.close()
            process.join()
            if isinstance(outcome, Exception):
                raise outcome
            self.results[key] = outcome
            if self.progress is not None:
                self.progress.update(amount)

    def __enter__(self) -> ShardPool:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        for process, *_ in self.running.values():
            process.terminate()
        for receiver, (process, *_) in self.running.items():
            process.join()
            receiver.close()
        self.running.clear()
