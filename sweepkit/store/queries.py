"""SQL reports: one ``queries/<name>.sql`` per report, its header documents and parameterises it.

Header convention (comment lines before the SQL; docs/warehouse.md has a full example)::

    -- speedup_table: plain against speculative decoding, time per output token
    --
    -- Grain: one row per device x context x batch of one decode run.
    --
    -- Key: device, context, batch
    --
    -- Parameters:
    --   $run_id = latest    decode run to read; latest = the newest committed decode run
    --   $context = null     only this context; null = all
    --
    -- Columns:
    --   device              accelerator, catalogue name
    --   ms_per_token_plain  ms, s_per_token_plain x 1e3

A default is ``null``, ``true``/``false``, a number, ``'quoted text'`` or a bare word (text). Parameters are
bound by DuckDB's named-parameter binding (``$name``), never by string formatting; every declared parameter
is bound, so the SQL must use each one. ``latest`` is plain text the SQL resolves itself (against ``runs``).

The query files live in the project's top-level ``queries/`` folder, which ``pyproject.toml`` ships as the
package :mod:`sweepkit.queries` (its SQL declared package data); they are read through :mod:`importlib.resources`,
so an installed wheel needs no checkout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa

from sweepkit.errors import InputError, bad_value

_PARAM = re.compile(r"^--\s+\$(\w+)\s*=\s*('[^']*'|\S+)\s*(.*)$")
_COLUMN = re.compile(r"^--\s+(\w+)\s*(.*)$")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


@dataclass(frozen=True)
class Param:
    """A declared parameter: name (without ``$``), default value, description."""

    name: str
    default: Any
    description: str


@dataclass(frozen=True)
class Query:
    """A report: name, file path, purpose line, grain, key (the columns no two rows share), parameters, output
    columns (name, description), SQL."""

    name: str
    path: str
    purpose: str
    grain: str
    key: tuple[str, ...]
    params: tuple[Param, ...]
    columns: tuple[tuple[str, str], ...]
    sql: str

    def bind(self, given: Mapping[str, Any] | None = None, *, parse_text: bool = True) -> dict[str, Any]:
        """Defaults overlaid with ``given`` (text values parsed like header defaults unless ``parse_text`` is
        False: then they stay text); unknown names refused."""
        values = {p.name: p.default for p in self.params}
        for key, value in (given or {}).items():
            if key not in values:
                allowed = ", ".join(values) if values else "none (this query takes no parameters)"
                raise bad_value("param", key, "one of " + allowed if values else allowed,
                                where=f"query {self.name}")
            if parse_text and isinstance(value, str):
                parsed = parse_value(value)
                if isinstance(values[key], str) and parsed is not None and not isinstance(parsed, str):
                    parsed = value                      # a text parameter stays text: run_id=123 is '123'
                value = parsed
            values[key] = value
        return values


def parse_value(text: str) -> Any:
    """``null`` -> None, ``true``/``false`` -> bool, numbers -> int/float, ``'x'`` -> x, else the text.

    >>> parse_value("512"), parse_value("0.7"), parse_value("null"), parse_value("'H100'"), parse_value("H100")
    (512, 0.7, None, 'H100', 'H100')
    """
    t = text.strip()
    low = t.lower()
    if low == "null":
        return None
    if low in ("true", "false"):
        return low == "true"
    if _NUMBER.match(t):
        return int(t) if re.fullmatch(r"[+-]?\d+", t) else float(t)
    if len(t) >= 2 and t[0] == t[-1] == "'":
        return t[1:-1]
    return t


def parse_header(name: str, text: str, path: str = "") -> Query:
    """Read a query file's header (see the module docstring)."""
    purpose, grain, section = "", "", None
    key: tuple[str, ...] = ()
    col_indent = 0
    params: list[Param] = []
    columns: list[tuple[str, str]] = []
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if not s.startswith("--"):
            break
        body = s[2:].strip()
        if not purpose and body:
            purpose = body.split(":", 1)[1].strip() if body.lower().startswith(name.lower() + ":") else body
            continue
        if body.lower().startswith("grain:"):
            grain, section = body.split(":", 1)[1].strip(), "grain"
        elif body.lower().startswith("key:"):
            key, section = tuple(k.strip() for k in body.split(":", 1)[1].split(",") if k.strip()), None
        elif body.lower().rstrip(":") == "parameters":
            section = "params"
        elif body.lower().rstrip(":") == "columns":
            section = "columns"
        elif not body:
            section = None
        elif section == "grain":
            grain += " " + body
        elif section == "params" and (m := _PARAM.match(s)):
            params.append(Param(m.group(1), parse_value(m.group(2)), m.group(3).strip()))
        elif section == "columns" and columns and len(s) - len(s[2:].lstrip()) > col_indent:
            columns[-1] = (columns[-1][0], f"{columns[-1][1]} {body}")      # a wrapped description
        elif section == "columns" and (m := _COLUMN.match(s)):
            col_indent = len(s) - len(s[2:].lstrip())
            columns.append((m.group(1), m.group(2).strip()))
    return Query(name=name, path=path, purpose=purpose, grain=grain, key=key, params=tuple(params),
                 columns=tuple(columns), sql=text)


def queries_dir() -> Path:
    """The folder of the query files: the :mod:`sweepkit.queries` package's own folder."""
    return Path(str(resources.files("sweepkit.queries")))


def list_queries() -> list[Query]:
    """Every query in the queries folder, by name."""
    folder = queries_dir()
    return [load_query(p.stem) for p in sorted(folder.glob("*.sql"))] if folder.is_dir() else []


def load_query(name: str) -> Query:
    """A query by name (``speedup_table``) or by the path of a ``.sql`` file.

    Raises:
      InputError: no such query (the message lists the known ones).
    """
    path = Path(name)
    if name.endswith(".sql") and path.is_file():
        return parse_header(path.stem, _read_text(path), str(path))
    file = queries_dir() / f"{name}.sql"
    if not re.fullmatch(r"[\w-]+", name) or not file.is_file():
        known = sorted(p.stem for p in queries_dir().glob("*.sql"))
        raise bad_value("query", name, known + ["a path to a .sql file"])
    return parse_header(name, _read_text(file), str(file))


def _read_text(path: Path) -> str:
    from sweepkit.inputs import read_text

    return read_text(path, "query file")


def run_query(warehouse: Any, name: str, params: Mapping[str, Any] | None = None, *,
              limit: int | None = None, parse_text: bool = True) -> pa.Table:
    """Run a report against a :class:`~sweepkit.store.Warehouse`.

    Args:
      warehouse: the warehouse.  name: query name or ``.sql`` path.
      params: parameter values; others keep their defaults. Text is parsed like header defaults (``'512'``
        becomes 512, as from ``--param``) unless ``parse_text`` is False (values already typed).
      limit: keep only the first rows.

    Returns:
      The result as an Arrow table.

    Raises:
      InputError: unknown query or parameter; or the SQL failed (the message is DuckDB's first line).
    """
    query = load_query(name)
    values = query.bind(params, parse_text=parse_text)
    import duckdb

    try:
        return warehouse.query(query.sql, values or None, limit=limit)
    except InputError as exc:                  # not one SELECT statement
        raise InputError(f"query {query.name} ({query.path}): {exc}") from None
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        given = ", ".join(f"{k}={values[k]!r}" for k in (params or {}))
        raise InputError(f"query {query.name}: {first}" + (f" (parameters given: {given})" if given else "")) from None
