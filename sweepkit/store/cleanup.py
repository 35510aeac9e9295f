"""Deleting what dead writers left: staging folders, uncommitted run folders, orphaned pending parts.

A writer's lock file (``staging/<id>.lock``) exists, flock-ed, before it writes anything and until after
its commit, so a run folder whose lock nobody holds and whose run is not committed belongs to a dead
writer (or to a run dropped since): it is deleted. The same holds for the run prefixes of an object-store
warehouse (``sweepkit.store.objstore``), where the lock stays in the local folder; a pending run's parts in
the store are kept while its local ``pending/<id>/manifest.json`` is there (``--resume`` needs them).
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

from sweepkit.store import objstore
from sweepkit.store.staging import held_by_live_writer


def clean_stale(wh) -> list[Path | str]:
    """Delete a :class:`~sweepkit.store.Warehouse`'s leftovers of dead writers; returns what was deleted
    (local paths, and object-store URIs).

    A folder found dead is deleted only if its run is still not committed when re-checked (a writer may
    have committed since the first read).
    """
    staging = wh.root / "staging"
    removed: list[Path | str] = []
    if staging.is_dir():
        for entry in staging.iterdir():
            if entry.is_dir() and not held_by_live_writer(staging / f"{entry.name}.lock"):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
            elif entry.name.endswith(".lock.tmp") and not held_by_live_writer(entry):
                removed.append(entry)
    parquet = wh.root / "parquet"
    runs: dict[str, list[Path | str]] = {}
    if parquet.is_dir():
        for part in itertools.chain.from_iterable(t.glob("run_id=*") for t in parquet.iterdir() if t.is_dir()):
            runs.setdefault(part.name[len("run_id="):], []).append(part)
    loc = wh.location()
    if loc is not None:
        for run_id, paths in objstore.run_ids(loc, "parquet").items():
            runs.setdefault(run_id, []).extend(loc.uri_of(p) for p in paths)
        for run_id, paths in objstore.run_ids(loc, "pending").items():
            if not (wh.root / "pending" / run_id / "manifest.json").is_file():
                objstore.delete_prefix(loc.filesystem(), paths[0])
                removed.append(loc.uri_of(paths[0]))
    if not runs:
        return removed
    committed = wh._committed_ids()
    dead = {r: ps for r, ps in runs.items() if r not in committed and not held_by_live_writer(staging / f"{r}.lock")}
    if dead:
        committed = wh._committed_ids()
        for run_id, paths in dead.items():
            if run_id in committed:
                continue
            for path in paths:
                if isinstance(path, Path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    objstore.delete_prefix(*objstore.split(path))
                removed.append(path)
    return removed
