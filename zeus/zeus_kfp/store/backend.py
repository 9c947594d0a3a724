"""What the store needs from an object store, and the local-directory backend.

Five requests, all object-level, because that is all a Kubeflow 1.11 namespace key may do
(TESTING.md): GET, PUT, LIST under a prefix (and its one-level form), and DELETE, which may be
refused. No request is conditional: the store trusts no `If-None-Match`, because SeaweedFS
(Kubeflow 1.11) checks it without a lock and MinIO 2019 (Kubeflow 1.10) ignores it. What the
store does trust, and every server it runs on gives: a GET or LIST that starts after a PUT was
answered sees that PUT (read-after-write consistency; consensus.py says why that is enough).

`put` creates or overwrites. The store only overwrites a key with the same bytes (a value
every writer agrees on) or a key no one else writes (one writer's own Paxos block), so a lost
answer retried, or two writers of one agreed value, change nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from zeus_kfp.store.errors import CorruptObjectError, StoreError
from zeus_kfp.store.text import printable


class ObjectNotFound(KeyError):
    """The key does not exist (or was deleted between a list and a get)."""


class Backend(Protocol):
    """Objects under one root. Keys are '/'-separated and relative to it."""

    uri: str
    location: str  # where, for messages: a directory, or endpoint + bucket; never credentials
    parallel: int  # how many GETs at once pay off (1: a local directory)

    def get(self, key: str) -> bytes:
        """The object's bytes; ObjectNotFound if absent, CorruptObjectError if it must not be read."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Create or overwrite `key`; a reader sees the old bytes or the new, never a mix."""
        ...

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        """Every key under `prefix` (recursively), sorted; only those after `start_after` if given."""
        ...

    def list_dirs(self, prefix: str) -> list[str]:
        """The sorted "folders" directly under `prefix` (which ends with '/'), each ending with '/'."""
        ...

    def delete(self, key: str) -> None:
        """Remove `key` (gone already is fine); DeleteRefusedError where the server refuses it."""
        ...


def get_many(backend: Backend, keys: list[str]) -> dict[str, bytes | CorruptObjectError | None]:
    """Several objects, in parallel where the backend gains by it: None for a key that is gone, the
    CorruptObjectError for one that must not be read."""

    def one(key: str) -> bytes | CorruptObjectError | None:
        try:
            return backend.get(key)
        except ObjectNotFound:
            return None
        except CorruptObjectError as exc:
            return exc

    if backend.parallel <= 1 or len(keys) <= 1:
        return {key: one(key) for key in keys}
    with ThreadPoolExecutor(max_workers=min(backend.parallel, len(keys))) as pool:
        return dict(zip(keys, pool.map(one, keys), strict=True))


TEMP_MARK = ".tmp-"
TEMP_MAX_AGE_S = 3600.0  # a temp file this old belongs to a writer that was killed (a put takes ms)


class LocalBackend:
    """A directory on a local or shared file system: zero setup, the embedded default."""

    parallel = 1

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._root = str(self.root)  # string forms: keys are joined and checked on every call
        self._inside = os.path.join(self._root, "")
        self.uri = self.root.as_uri()  # percent-encodes the name's bytes: a name that is not UTF-8 round-trips
        self.location = printable(str(self.root))  # for messages, which must print

    def _path(self, key: str) -> str:
        # Keys are built from validated segments (keys.py); this is the last line of defence. Lexical,
        # not resolve(): a symbolic link inside the store is reported by get(), not followed out of it.
        path = os.path.normpath(os.path.join(self._root, key))
        if not path.startswith(self._inside):
            raise ValueError(f"key {key!r} leaves the store root {self.root}")
        return path

    def put(self, key: str, data: bytes) -> None:
        """A temp file flushed to disk, then renamed over `key`: a name that survives a crash has all its
        bytes (empty objects have none to lose and are not flushed: a flush waits for the journal)."""
        path = self._path(key)
        tmp = os.path.join(os.path.dirname(path), f"{TEMP_MARK}{uuid.uuid4().hex}")
        try:
            for tries in range(3):  # a delete's clean-up may remove the folder between makedirs and open
                os.makedirs(os.path.dirname(path), exist_ok=True)
                try:
                    handle = open(tmp, "wb")  # noqa: SIM115 (closed below; only the open is retried)
                    break
                except FileNotFoundError:
                    if tries == 2:
                        raise
            with handle:
                handle.write(data)
                if data:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StoreError(f"no space left writing {key} in the store {self.location}") from None
            raise
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            # O_NONBLOCK: opening a named pipe for reading would wait for a writer for ever; with it
            # the open returns and fstat below refuses what is not a regular file. Regular files ignore it.
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError as exc:
            raise ObjectNotFound(key) from exc
        except PermissionError:
            raise CorruptObjectError(key, "not readable (permission denied)") from None
        except OSError:  # ELOOP: the key is a symbolic link
            if os.path.islink(path):
                raise CorruptObjectError(key, "a symbolic link (zeus-kfp never writes one); not followed") from None
            raise
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise CorruptObjectError(key, "not a regular file")
            return handle.read()

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        keys: list[str] = []
        self._walk("", prefix, start_after, keys)
        keys.sort()
        return keys

    def _walk(self, rel: str, prefix: str, start_after: str | None, out: list[str]) -> None:
        """Keys under the folder `rel`, pruning folders outside `prefix` or wholly before `start_after` (a
        log read lists only the slots after its snapshot, not every folder of the job)."""
        try:
            entries = list(os.scandir(os.path.join(self._root, rel) if rel else self._root))
        except (FileNotFoundError, NotADirectoryError):
            return
        # In name order, as S3 lists: a listing then passes keys in key order, so a delete that removes a job's
        # log from its last slot back is never seen half-way as a hole (docs/STORE.md, "Deleting a job").
        entries.sort(key=lambda entry: entry.name)
        for entry in entries:
            key = rel + entry.name
            if entry.is_dir(follow_symlinks=False):
                folder = key + "/"
                if not (folder.startswith(prefix) or prefix.startswith(folder)):
                    continue
                if start_after is not None and folder < start_after and not start_after.startswith(folder):
                    continue  # every key in it sorts before start_after
                self._walk(folder, prefix, start_after, out)
            elif (
                not entry.name.startswith(TEMP_MARK)
                and key.startswith(prefix)
                and (start_after is None or key > start_after)
            ):
                out.append(key)

    def list_dirs(self, prefix: str) -> list[str]:
        base = self._path(prefix.rstrip("/")) if prefix.strip("/") else self._root
        if not os.path.isdir(base) or os.path.islink(base):
            return []
        return sorted(f"{prefix}{entry.name}/" for entry in os.scandir(base) if entry.is_dir(follow_symlinks=False))

    def delete(self, key: str) -> None:
        Path(self._path(key)).unlink(missing_ok=True)

    def remove_empty_dirs(self, prefix: str) -> None:
        """Remove the folders under `prefix` (itself included) that hold nothing: a deleted job's folders would
        still list as a job's (S3 has no folders to leave behind). A folder a writer fills meanwhile stays."""
        top = self._path(prefix.rstrip("/"))
        for dirpath, _dirs, _files in os.walk(top, topdown=False):  # children before their parents
            with contextlib.suppress(OSError):  # not empty (a writer got there first), or gone
                os.rmdir(dirpath)

    def collect_temp(self, older_than_s: float = TEMP_MAX_AGE_S) -> int:
        """Delete the temp files that writers killed inside `put` left anywhere in the store."""
        removed = 0
        for dirpath, _dirs, files in os.walk(self._root):
            for name in files:
                if not name.startswith(TEMP_MARK):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    if time.time() - os.lstat(path).st_mtime > older_than_s:
                        os.unlink(path)
                        removed += 1
                except FileNotFoundError:
                    continue
        return removed
