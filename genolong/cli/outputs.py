"""Where a command may write: commands declare their path arguments (:func:`declare`), and :func:`guarded`
refuses an unusable or destructive output in one line before any work (a directory is usable when new,
empty or marked as genolong's run of the same kind), locks each output (:class:`OutputLock`), and after a
user error removes what the command created; docs/reliability.md lists every case."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from genolong.core.errors import UserError, disk_full, disk_full_error
from genolong.core.files import claim_directory, directory_kind, probe_writable, work_files, work_path
from genolong.core.locks import OutputLock, lock_path
from genolong.runtime.launch import is_first_process


@dataclass(frozen=True)
class OutputDirectory:
    """An output directory argument holding runs of ``kind`` (``"pretrain"``..., recorded in its marker;
    None: only checked, never claimed, as a shared cache). ``atomic``: the command writes it whole under a
    temporary name and renames it into place; otherwise it is created and claimed before the work, so
    that an interrupted run can be resumed there."""

    kind: str | None
    atomic: bool = False


@dataclass(frozen=True)
class PathRoles:
    """The roles of a command's path arguments, by ``argparse`` destination."""

    inputs: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    directories: dict[str, OutputDirectory] = field(default_factory=dict)
    defaults: dict[str, Callable[[argparse.Namespace], Path]] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)


def declare(parser, func: Callable[[argparse.Namespace], int | None], *, inputs: Iterable[str] = (),
            files: Iterable[str] = (), directories: dict[str, OutputDirectory] | None = None,
            defaults: dict[str, Callable[[argparse.Namespace], Path]] | None = None) -> None:
    """Record on ``parser`` the function that runs the command (``func``: given the parsed arguments, it
    returns the exit status, None for 0) and which arguments (by destination) are inputs, output files and
    output directories. ``defaults`` compute an output left out from the other arguments
    (``DATA/kmer_baseline.json``), so that the guard checks it like a given path."""
    flags = {action.dest: (action.option_strings or [action.dest])[-1] for action in parser._actions}
    parser.set_defaults(func=func, path_roles=PathRoles(tuple(inputs), tuple(files), dict(directories or {}),
                                                        dict(defaults or {}), flags))


# -- checks ------------------------------------------------------------------------------------
def _values(args, names: Iterable[str]) -> Iterator[tuple[str, Path]]:
    """(argument name, path) of each given path argument; lists give several; ``-`` is stdout."""
    for name in names:
        value = getattr(args, name, None)
        for item in value if isinstance(value, list | tuple) else [value]:
            if item is not None and str(item) != "-":
                yield name, Path(item)


def _nearest_existing(path: Path) -> Path:
    path = _absolute(path)
    while not os.path.lexists(path):
        path = path.parent
    return path


def check_location(path: Path, what: str, *, file: bool = False) -> None:
    """``path`` (a ``file``'s parent) can be created or written in: its nearest existing ancestor is a
    directory where a file can be created, and every name still to create fits with its temporary form."""
    ancestor = _nearest_existing(path.parent if file else path)
    if not ancestor.is_dir():
        raise UserError(f"{what} {path}: {ancestor} is a file, not a directory")
    for part in _absolute(path).relative_to(ancestor).parts:
        if len(os.fsencode(work_path(part, "12345678.tmp").name)) > os.pathconf(ancestor, "PC_NAME_MAX"):
            raise UserError(f"{what} {path}: the name {part[:40]}... is too long for the file system")
    try:
        probe_writable(ancestor)
    except OSError as err:
        raise UserError(f"{what} {path}: cannot write in {ancestor} ({err.strerror or err})") from None


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def check_output_file(path: Path, what: str, inputs: dict[Path, str], *, default: bool = False) -> None:
    """``path`` may be written: not a directory or special file, not an input, not an existing file of
    an input directory (unless it is the command's own ``default`` there), writable."""
    _check_not_broken_link(path, what)
    if path.is_dir():
        raise UserError(f"{what} {path}: is a directory; give a file name")
    if os.path.lexists(path):
        if not stat.S_ISREG(path.stat().st_mode):
            raise UserError(f"{what} {path}: not a regular file (a FIFO or device); give a file name")
        for source, source_what in inputs.items():
            if source.is_file() and os.path.samefile(path, source):
                raise UserError(f"{what} {path} is the input {source_what}; choose another file name")
            if source.is_dir() and not default and _inside(real_path(path), source):
                raise UserError(f"{what} {path} is a file of the input {source_what}; choose another file name")
    check_location(path, what, file=True)


def check_output_directory(path: Path, what: str, kind: str | None, inputs: dict[Path, str]) -> None:
    """``path`` may hold the outputs: a directory (or nothing yet), writable, holding no input, and (with
    a ``kind``) new, empty or already genolong's for that kind."""
    _check_not_broken_link(path, what)
    if os.path.lexists(path) and not path.is_dir():
        raise UserError(f"{what} {path}: is a file, not a directory")
    resolved = real_path(path)
    for source, source_what in inputs.items():
        if _inside(source, resolved):  # a new directory inside an input directory is fine
            raise UserError(f"{what} {path} is or holds the input {source_what}; choose a separate directory")
    if kind is not None and path.is_dir():
        occupant = directory_kind(path)
        if occupant is None and any(path.iterdir()):
            example = sorted(p.name for p in path.iterdir())[0]
            raise UserError(f"{what} {path} holds files genolong did not write (such as {example}); "
                            "choose a new or empty directory")
        if occupant not in (None, kind):
            raise UserError(f"{what} {path} holds a genolong {occupant} run, not a {kind} run; "
                            "choose another directory")
    check_location(path, what)


def _check_not_broken_link(path: Path, what: str) -> None:
    if path.is_symlink() and not path.exists():
        raise UserError(f"{what} {path}: a broken symbolic link (its target is missing or a loop); "
                        "remove it or give another path")


# -- the guard ---------------------------------------------------------------------------------
@dataclass
class _Output:
    path: Path
    directory: OutputDirectory | None  # None for a file
    what: str  # the option, for messages
    lock: OutputLock | None = None  # held while the command runs
    existed: bool = field(init=False)  # before the command (note_state)
    was_empty: bool = field(init=False)  # an existing directory holding nothing
    work_files: set[Path] = field(init=False)  # the hidden ``.NAME.*`` beside it before the command

    def note_state(self) -> None:
        """What is there before the command: the output, whether it is an empty directory, its work files."""
        self.existed = os.path.lexists(self.path)
        self.was_empty = self.existed and self.path.is_dir() and not any(self.path.iterdir())
        self.work_files = _work_files(self.path)

    @property
    def built_in_place(self) -> bool:
        """A run directory created and claimed before the work (resumable), not written atomically."""
        return bool(self.directory and self.directory.kind and not self.directory.atomic)

    def new_work_files(self) -> set[Path]:
        return _work_files(self.path) - self.work_files


class OutputPlan:
    """The outputs of one command, checked; see the module docstring."""

    def __init__(self, args, roles: PathRoles):
        defaulted = [name for name in roles.defaults if getattr(args, name, None) is None]  # in order: one may use another
        for name in defaulted:
            setattr(args, name, roles.defaults[name](args))
        inputs = {real_path(path): f"{roles.flags.get(name, name)} {path}"
                  for name, path in _values(args, roles.inputs) if os.path.lexists(path)}
        self.outputs: list[_Output] = []
        self.created_parents: list[Path] = []
        seen: dict[Path, str] = {}
        to_stdout = [roles.flags.get(name, name) for name in roles.files if str(getattr(args, name, None)) == "-"]
        if len(to_stdout) > 1:
            raise UserError(f"only one output can go to standard output (-), not {' and '.join(to_stdout)}")
        for name, path in _values(args, [*roles.files, *roles.directories]):
            directory, what = roles.directories.get(name), roles.flags.get(name, name)
            with _as_user_error(what, path):
                if directory is None:
                    check_output_file(path, what, inputs, default=name in defaulted)
                else:
                    check_output_directory(path, what, directory.kind, inputs)
                key = real_path(path)
                if key in seen:
                    raise UserError(f"{seen[key]} and {what} name the same path {path}; give each its own")
                seen[key] = what
                output = _Output(path, directory, what)
                output.note_state()
            self.outputs.append(output)
            self._note_missing_parents(path)

    def _note_missing_parents(self, path: Path) -> None:
        parent = _absolute(path).parent
        while not os.path.lexists(parent):
            if parent not in self.created_parents:
                self.created_parents.append(parent)
            parent = parent.parent

    def lock(self) -> None:
        """Lock every output but a shared cache (creating the parents its lock file needs), then note what
        exists (another run may have written it since the checks). An output locked by another run is a
        UserError; the locks taken are then released and nothing else is touched."""
        try:
            for output in self.outputs:
                if output.directory and output.directory.kind is None:
                    continue  # a shared cache: its users wait for each other on its own locks
                with _as_user_error(output.what, output.path):
                    _absolute(output.path).parent.mkdir(parents=True, exist_ok=True)
                    output.lock = OutputLock(output.path, output.what)
                    output.lock.acquire()
        except BaseException:
            self.finish()
            raise
        for output in self.outputs:
            output.note_state()

    def claim(self) -> None:
        """Create and mark the directories that are built in place (before the work)."""
        for output in self.outputs:
            if output.built_in_place:
                with _as_user_error(output.what, output.path):
                    claim_directory(output.path, output.directory.kind)

    def finish(self) -> None:
        """After the command: release the locks and remove parent directories it made that stayed empty."""
        for output in self.outputs:
            if output.lock is not None:
                output.lock.release()
        self._remove_empty_parents()

    def undo(self, *, keep_resumable: bool = False) -> list[Path]:
        """After a user error: remove what the command created among its outputs; with ``keep_resumable``
        (a full disk), keep the directories built in place, from which a rerun continues, and return them."""
        kept = []
        for output in self.outputs:
            if keep_resumable and output.built_in_place:
                kept.append(output.path)
            elif not output.existed:
                _remove(output.path)
            elif output.was_empty:
                for child in output.path.iterdir():
                    _remove(child)
            for work in output.new_work_files():
                _remove(work)
        self.finish()
        return kept

    def disk_full(self, err: Exception) -> UserError:
        """Undo after ``err``, a full (over-quota, read-only) file system, and say in one line which output
        was being written and what is kept."""
        target = str(getattr(err, "filename", None) or "")
        output = next((o for o in self.outputs if target.startswith(str(_absolute(o.path).parent))),
                      self.outputs[0] if len(self.outputs) == 1 else None)
        kept = self.undo(keep_resumable=True)
        where = (f"{output.what} {output.path}" if output else target
                 or ("standard output" if not self.outputs else "the outputs or standard output"))
        if kept:
            what = f"{', '.join(map(str, kept))} kept: free space and run the command again to continue"
        else:
            what = "nothing partial kept"
        return disk_full_error(err, where, what)

    def _remove_empty_parents(self) -> None:
        for parent in sorted(self.created_parents, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                parent.rmdir()  # only when empty


@contextlib.contextmanager
def _as_user_error(what: str, path: Path) -> Iterator[None]:
    """An OSError while checking or claiming an output (an unreadable directory...) as one line."""
    try:
        yield
    except OSError as err:
        if disk_full(err):
            raise disk_full_error(err, f"{what} {path}", "nothing written") from None
        raise UserError(f"{what} {path}: {err.strerror or err}") from None


def _work_files(path: Path) -> set[Path]:
    """The work files of ``path`` but its lock, which the guard releases."""
    return work_files(path) - {lock_path(path)}


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def real_path(path: Path) -> Path:
    """``path`` with every symlink resolved (a symlink loop stays as it is, never an error)."""
    return Path(os.path.realpath(path))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def guarded(args) -> Iterator[None]:
    """Run a command within its output policy; a no-op for a command without declared path roles."""
    roles = getattr(args, "path_roles", None)
    if roles is None:
        yield
        return
    plan = OutputPlan(args, roles)
    if is_first_process():  # the other ranks of a launch share the first one's outputs and lock
        plan.lock()
    try:
        plan.claim()
        yield
    except UserError:
        plan.undo()
        raise
    except Exception as err:
        if not disk_full(err):
            plan.finish()
            raise
        raise plan.disk_full(err) from None
    except BaseException:
        plan.finish()
        raise
    plan.finish()
