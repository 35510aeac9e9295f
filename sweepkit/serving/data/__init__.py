"""Packaged serving data: workloads.toml, levers.toml, cluster.toml (each number with its source)."""
