"""SQL text the warehouse's modules share: the reports' macros and string literals.

Kept apart from :mod:`sweepkit.store.db` so that the feed views (:mod:`sweepkit.store.feed`), which
:mod:`sweepkit.store.db` creates, take them from here and no module imports the other back.
"""

from __future__ import annotations

from importlib import resources


def macros_sql(*, temp: bool = False) -> str:
    """``sweepkit/store/macros.sql``, the reports' shared SQL, with the metric catalogue filled in.

    DuckDB binds a macro when it is created, so they are applied once the tables' views exist
    (:func:`sweepkit.store.db.create_views`); ``temp`` makes them temporary macros (a read-only connection).

    Example:
      >>> "create or replace macro latest_run" in macros_sql() and "'goodput', 'req/s per GPU'" in macros_sql()
      True
    """
    from sweepkit.catalogue.metrics import values_sql

    text = resources.files("sweepkit.store").joinpath("macros.sql").read_text(encoding="utf-8")
    rows = "\n".join("        " + line for line in values_sql().splitlines())
    text = text.replace("{metrics}", rows)
    return text.replace("create or replace macro", "create or replace temp macro") if temp else text


def sql_str(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"
