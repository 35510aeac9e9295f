"""The results warehouse: Parquet per run + a DuckDB file of run records and views; SQL reports.

Pipeline position: catalogue -> cost model -> sweep -> **warehouse -> queries** -> reports.
docs/warehouse.md describes the layout, the commit protocol and how to read it from DuckDB or Parquet.
"""

from sweepkit.store.queries import Query, list_queries, load_query, run_query
from sweepkit.store.warehouse import KINDS, Warehouse, default_root

__all__ = ["KINDS", "Query", "Warehouse", "default_root", "list_queries", "load_query", "run_query"]
