"""Opening the store from the command line, with the checks a person needs before anything runs.

Why here and not in zeus.store: the store treats a missing directory as an empty store (a step
creates it on first write), which is right for the pipeline but wrong for a person who mistyped
`--store`: `jobs` would say "no jobs" and `show` would raise from deep inside. So the commands
check a local store's path first: a reader needs an existing directory, a writer a directory it
may write (or a path it may create). S3 stores report their own errors (zeus.store.errors).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

from zeus.errors import FieldError


class StoreNotWritableError(RuntimeError):
    """This process may not write the local store directory (an environment problem: exit 1)."""


def local_path(uri: str) -> Path | None:
    """The directory of a local store's resolved URI (file://...), None for any other store."""
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def open_for_reading(uri: str | None):
    """The store at `uri` (None: $ZEUS_KFP_STORE or ./.zeus-kfp/store), which must exist if local."""
    from zeus.store import open_store

    store = open_store(uri)
    path = local_path(store.uri)
    if path is not None and not path.exists():
        raise FieldError(
            "store",
            uri or str(path),
            f"an existing store directory ({path} does not exist; `zeus-kfp run --store PATH` creates one)",
        )
    return store


def open_for_writing(uri: str | None):
    """The store at `uri`, checked writable if local: created if missing, probed with a temporary file."""
    from zeus.store import open_store

    store = open_store(uri)
    path = local_path(store.uri)
    if path is None:
        return store
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".zeus-kfp-write-check-"):
            pass
    except OSError as err:
        raise StoreNotWritableError(
            f"cannot write the store directory {path} ({err.strerror}): check its owner, mode and attributes"
        ) from None
    return store
