"""The ``sweepkit`` command line (click). Entry point: ``sweepkit.cli:main``.

Each command lives in its own module and is registered in :data:`COMMANDS` below: command name ->
``"module:attribute"`` of a ``click.Command``. To add one (``simulate``, ``matrix``, ``trace``, ``report``,
``export``, ...), write ``sweepkit/cli/<name>.py`` defining a click command and add ONE line here; no other
module changes. Modules are imported only when their command runs (or for ``sweepkit --help``), so a slow or
broken import in one command does not affect the others.

Conventions every command follows (tests/cli/test_cli.py checks them):
  * ``--help`` text ends with an ``Example:`` line that runs as written;
  * commands that read data take ``--warehouse PATH`` and ``--format table|csv|json|markdown``
    (``sweepkit.cli.common``); with ``--format json`` stdout carries one JSON array and nothing else;
  * bad input raises :class:`sweepkit.errors.InputError` (or ``common.BadInput``): one ``Error:`` line on
    stderr, exit status 2, never a traceback; a file-system error (OSError) gives one line and status 1.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from sweepkit import __version__
from sweepkit.cli.common import BadInput, one_line, with_hint
from sweepkit.errors import InputError

COMMANDS: dict[str, str] = {
    "run": "sweepkit.cli.run:run",
    "query": "sweepkit.cli.query:query",
    "sql": "sweepkit.cli.sql:sql",
    "runs": "sweepkit.cli.runs:runs",
    "drop": "sweepkit.cli.drop:drop",
    "devices": "sweepkit.cli.catalog:devices",
    "models": "sweepkit.cli.catalog:models",
    "acceptance": "sweepkit.cli.catalog:acceptance",
    "trace": "sweepkit.cli.trace:trace",
    "report": "sweepkit.cli.report:report",
    "export": "sweepkit.cli.export:export",
    "simulate": "sweepkit.cli.simulate:simulate", "matrix": "sweepkit.cli.simulate:matrix",
    "validate": "sweepkit.cli.validate:validate", "calibrate": "sweepkit.cli.calibrate:calibrate",
    "serve": "sweepkit.cli.serve:serve",
    "verify": "sweepkit.cli.verify:verify",
    "workload": "sweepkit.cli.workload:workload",
    "plan": "sweepkit.cli.plan:plan",
}
"""Registered commands: name -> "module:attribute". Add a line to add a command."""

COMPUTING = ("run", "simulate", "trace", "report", "serve", "plan")
"""Commands that run JAX programs: they get the persistent compilation cache (``sweepkit.jaxcache``); the
others never import JAX, so that ``sql``, ``query``, ``runs``, ... start without its import time."""


class SweepkitGroup(click.Group):
    """Lazily imported commands; InputError turned into one line + exit status 2; OSError and DuckDB errors
    into one line + 1; Ctrl-C into one line + 130."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """The command to run; a computing one gets the persistent compilation cache first (listing the
        commands in ``--help`` imports no JAX)."""
        name, cmd, rest = super().resolve_command(ctx, args)
        if name in COMPUTING:
            from sweepkit.jaxcache import enable_persistent_cache
            from sweepkit.xla_options import setting_problem

            if problem := setting_problem():
                raise InputError(problem)
            enable_persistent_cache()
        return name, cmd, rest

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:     # a bad option or argument: one line, like any other bad input
            where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
            raise BadInput(one_line(f"{where}{exc.format_message()}")) from None
        except BrokenPipeError:             # the reader stopped reading (`| head`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())      # so that the flush at exit does not fail again
            raise click.exceptions.Exit(0) from None
        except InputError as exc:
            raise BadInput(with_hint(one_line(str(exc)))) from None
        except OSError as exc:       # the file system refused (a warehouse folder in the way, no space, ...)
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(one_line(f"{where}{exc.strerror or exc}")) from None
        except KeyboardInterrupt:    # (a run interrupted mid-write says so itself, in sweepkit.cli.run)
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(130) from None
        except Exception as exc:
            # DuckDB refusing the warehouse's database (not a DuckDB file, a folder in its place, a Parquet
            # file of a committed run deleted by hand, ...): one line and status 1, like a file-system error.
            if type(exc).__module__.split(".")[0] in ("duckdb", "_duckdb"):
                raise click.ClickException(with_hint(one_line(f"warehouse database: {exc}"))) from None
            raise


@click.group(cls=SweepkitGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="sweepkit")
def main() -> None:
    """sweepkit: vectorized LLM-inference parameter sweeps with a DuckDB/Parquet results warehouse.

    \b
    Example: sweepkit run grids/seed.toml && sweepkit query break_even --format markdown
    """


__all__ = ["COMMANDS", "main"]
