"""Dropping committed runs: their rows leave ``runs`` and ``run_files`` and the views in one transaction,
then their Parquet folders are deleted.

The order keeps the warehouse's guarantee: the moment the transaction commits, no view names the run's
files; until then, every view still reads all of them. A process killed between the commit and the
deletion leaves folders of a run that is no longer committed, which the next writer's ``clean_stale``
deletes like any dead run's. This is also the way out when a committed run's Parquet file was deleted by
hand (every query of its table then fails naming the file): drop that run.
"""

from __future__ import annotations

import posixpath
import shutil
from typing import Sequence

from sweepkit.errors import bad_value
from sweepkit.store import db, objstore


def drop_runs(warehouse, run_ids: Sequence[str]) -> dict[str, int]:
    """Drop committed runs from a :class:`~sweepkit.store.Warehouse`.

    Args:
      warehouse: the warehouse.  run_ids: ids as ``sweepkit runs`` lists them (at least one).

    Returns:
      run id -> number of Parquet files it had.

    Raises:
      InputError: an id that is not a committed run (nothing is dropped then).
    """
    ids = list(dict.fromkeys(run_ids))
    if not ids:
        raise bad_value("run_id", "", "at least one committed run id (sweepkit runs lists them)")
    _check_committed(ids, warehouse._committed_ids())   # before opening read-write (a new file has no tables)
    with db.gate(warehouse.gate_path, exclusive=True):
        con = db.open_db(warehouse.db_path, read_only=False)
        try:
            con.execute("begin transaction")
            _check_committed(ids, {r[0] for r in con.execute(   # again: another process may have dropped one
                "select run_id from runs where list_contains($ids, run_id)", {"ids": ids}).fetchall()})
            rows = con.execute("select run_id, table_name, count(*), min(path) from run_files "
                               "where list_contains($ids, run_id) group by all", {"ids": ids}).fetchall()
            con.execute("delete from run_files where list_contains($ids, run_id)", {"ids": ids})
            con.execute("delete from runs where list_contains($ids, run_id)", {"ids": ids})
            tables = sorted({table for _, table, _, _ in rows})
            db.create_views(con, warehouse.root, temp=False, tables=tables)
            declared, files = db.contracts(con), db.files_by_table(con)
            for table in tables:                      # no file left and no contract: the view goes too
                if table not in declared and table not in files:
                    con.execute(f"drop view if exists {db.check_ident(table, 'table')}")
            con.execute("commit")
        except BaseException:
            try:
                con.execute("rollback")
            except Exception:  # noqa: BLE001 - the original error is the one to report
                pass
            raise
        finally:
            con.close()
    counts = {run_id: 0 for run_id in ids}
    for run_id, table, n, path in rows:
        counts[run_id] += n
        if objstore.is_uri(path):                       # an object store: the run's prefix in it
            fs, key = objstore.split(path)
            objstore.delete_prefix(fs, posixpath.dirname(key))
        else:
            shutil.rmtree(warehouse.root / "parquet" / table / f"run_id={run_id}", ignore_errors=True)
    return counts


def _check_committed(ids: Sequence[str], committed: set[str]) -> None:
    missing = [run_id for run_id in ids if run_id not in committed]
    if missing:
        raise bad_value("run_id", missing[0], "a committed run (sweepkit runs lists them)")
