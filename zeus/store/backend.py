"""The object store the tables live in: a small create-only interface, and the local-directory backend.

Why create-only: the store is append-only (DESIGN.md), so the one write primitive is
"create this key if it does not exist" (`put_new`). It is atomic and exclusive on both
backends: here by a hard link from a finished temp file (readers never see half a file, and
two writers of one key cannot both win); on S3 by `If-None-Match: *` (see s3.py). Deletion
exists only for compaction, which removes hints it has already merged and old snapshots.

`list_times` gives each key's last-modified time by the storage's own clock (S3 LastModified,
file mtime): compaction compares times of objects on one server, never a pod's clock.
"""

from __future__ import annotations

import os
import stat
import time
import uuid
from pathlib import Path
from typing import Protocol

from zeus.store.errors import CorruptObjectError


class ObjectNotFound(KeyError):
    """The key does not exist (or was removed by compaction between a list and a get)."""


class Backend(Protocol):
    """What the store needs from an object store. Keys are '/'-separated and relative to the root."""

    uri: str
    location: str  # where, for messages: a directory, or endpoint + bucket; never credentials

    def put_new(self, key: str, data: bytes) -> bool:
        """Create `key` with `data` unless it exists. True if this call created it."""
        ...

    def put_cache(self, key: str, data: bytes) -> bool:
        """`put_new` for a cache (a kept fold): it may be lost or cut short by a crash of the machine,
        which its reader sees as a miss or a damaged object (a checksum), never as wrong data."""
        ...

    def get(self, key: str) -> bytes:
        """The object's bytes; raises ObjectNotFound."""
        ...

    def get_many(self, keys: list[str]) -> dict[str, bytes | CorruptObjectError | None]:
        """Several objects at once (in parallel where it helps); None for a key that is gone, a
        CorruptObjectError for one that exists but must not be read (a symbolic link in a directory)."""
        ...

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        """Every key under `prefix` (recursively), sorted, optionally only those after `start_after`."""
        ...

    def list_times(self, prefix: str) -> dict[str, float]:
        """Every key under `prefix` with its last-modified time (seconds since the epoch, storage clock)."""
        ...

    def list_dirs(self, prefix: str) -> list[str]:
        """The sorted "folders" directly under `prefix` (which ends with '/'), each ending with '/'."""
        ...

    def delete(self, keys: list[str]) -> None:
        """Remove keys; keys already gone are fine."""
        ...

    def conditional_writes_honoured(self) -> bool:
        """Whether `put_new` really is exclusive here (compaction deletes only if it is)."""
        ...


def create_or_confirm(backend: Backend, key: str, data: bytes) -> bool:
    """Create `key` with `data`, or find it already holding exactly `data`: our own create whose answer
    was lost (the retry is refused: the key exists, and it is ours). False if it holds something else."""
    if backend.put_new(key, data):
        return True
    try:
        return backend.get(key) == data
    except ObjectNotFound:
        return False


TEMP_MARK = ".tmp-"
TEMP_MAX_AGE_S = 3600.0  # a temp file this old belongs to a writer that was killed (put_new takes ms)


def probe_exclusive_create(backend: Backend) -> bool:
    """Ask the storage itself, don't assume: create a scratch key twice; the second must be refused."""
    probe = f"_probe/{uuid.uuid4().hex}"
    try:
        return backend.put_new(probe, b"1") and not backend.put_new(probe, b"2")
    finally:
        backend.delete([probe])


class LocalBackend:
    """A directory on a local or shared file system: zero setup, the embedded default."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._root = str(self.root)  # string forms: keys are joined and checked on every call
        self._inside = os.path.join(self._root, "")
        self.uri = self.root.as_uri()
        self.location = str(self.root)
        self._honoured: bool | None = None

    def _location(self, key: str) -> str:
        # Keys are built from validated segments (keys.py); this is the last line of defence. Lexical,
        # not resolve(): a symbolic link inside the store is reported by get(), not followed out of it.
        path = os.path.normpath(os.path.join(self._root, key))
        if not path.startswith(self._inside):
            raise ValueError(f"key {key!r} leaves the store root {self.root}")
        return path

    def _path(self, key: str) -> Path:
        return Path(self._location(key))

    def put_new(self, key: str, data: bytes) -> bool:
        """Write a temp file, flush it to disk, link it to `key`: a name that survives a crash has all
        its bytes. An empty object (a hint) has no bytes to lose, so it is not flushed (a flush waits
        for the file system's journal: about 0.2 ms alone, several ms with 8 writers at once)."""
        return self._create(key, data, durable=bool(data))

    def put_cache(self, key: str, data: bytes) -> bool:
        return self._create(key, data, durable=False)

    def _create(self, key: str, data: bytes, durable: bool) -> bool:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            return False
        tmp = path.parent / f"{TEMP_MARK}{uuid.uuid4().hex}"
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                if durable:
                    handle.flush()
                    os.fsync(handle.fileno())
            try:
                # link() fails if the target exists: an atomic, exclusive create of a complete file.
                os.link(tmp, path)
            except FileExistsError:
                return False
            return True
        finally:
            tmp.unlink(missing_ok=True)

    def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError as exc:
            raise ObjectNotFound(key) from exc
        except OSError:  # ELOOP: the key is a symbolic link
            if os.path.islink(path):
                raise CorruptObjectError(key, "a symbolic link (zeus-kfp never writes one); not followed") from None
            raise
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise CorruptObjectError(key, "not a regular file")
            return handle.read()

    def get_many(self, keys: list[str]) -> dict[str, bytes | CorruptObjectError | None]:
        out: dict[str, bytes | CorruptObjectError | None] = {}
        for key in keys:
            try:
                out[key] = self.get(key)
            except ObjectNotFound:
                out[key] = None
            except CorruptObjectError as exc:
                out[key] = exc
        return out

    def _walk(self, prefix: str, temp: bool = False) -> list[str]:
        """Keys under `prefix`; temp files of writers in progress are left out (or, with temp, only they)."""
        directory, _, _ = prefix.rpartition("/")
        base = self._location(directory) if directory else self._root
        if not os.path.isdir(base) or os.path.islink(base):
            return []
        keys = []
        for dirpath, _dirs, files in os.walk(base):  # does not descend into symbolic links to directories
            rel_dir = dirpath[len(self._inside) :].replace(os.sep, "/") if dirpath != self._root else ""
            for name in files:
                if name.startswith(TEMP_MARK) != temp:
                    continue
                key = f"{rel_dir}/{name}" if rel_dir else name
                if key.startswith(prefix):
                    keys.append(key)
        keys.sort()
        return keys

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        return [k for k in self._walk(prefix) if start_after is None or k > start_after]

    def list_times(self, prefix: str) -> dict[str, float]:
        times = {}
        for key in self._walk(prefix):
            try:
                times[key] = os.lstat(self._path(key)).st_mtime
            except FileNotFoundError:
                continue
        return times

    def collect_temp(self, prefix: str, older_than_s: float = TEMP_MAX_AGE_S) -> int:
        """Delete temp files that writers killed inside put_new left behind (older than any live write)."""
        removed = 0
        for key in self._walk(prefix, temp=True):
            path = self._path(key)
            try:
                if time.time() - os.lstat(path).st_mtime > older_than_s:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue
        return removed

    def list_dirs(self, prefix: str) -> list[str]:
        base = self._path(prefix.rstrip("/"))
        if not base.is_dir():
            return []
        return sorted(f"{prefix}{entry.name}/" for entry in os.scandir(base) if entry.is_dir())

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            self._path(key).unlink(missing_ok=True)

    def conditional_writes_honoured(self) -> bool:
        # Hard links are exclusive on POSIX file systems, but some network file systems emulate them.
        if self._honoured is None:
            self._honoured = probe_exclusive_create(self)
        return self._honoured
