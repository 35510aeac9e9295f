"""docs/cli.md, generated from the commands' own ``--help`` texts, so the reference cannot drift.

``python -m sweepkit.cli.docs > docs/cli.md`` rewrites it; a test checks the file equals :func:`cli_markdown`
and that every registered command has a section and an executed ``Example:`` line.
"""

from __future__ import annotations

import click

HEADER = """# Command reference

Generated from each command's `--help` (`python -m sweepkit.cli.docs > docs/cli.md`); every `Example:` line
below is executed by the test suite against a temporary warehouse.
"""


def help_text(name: str | None) -> str:
    """The ``--help`` text of one command (``None``: the ``sweepkit`` group itself), 100 columns wide.

    Example:
      >>> "Example:" in help_text("runs")
      True
    """
    from sweepkit.cli import main

    parent = click.Context(main, info_name="sweepkit", max_content_width=100, terminal_width=100,
                           help_option_names=["-h", "--help"])
    if name is None:
        return main.get_help(parent)
    command = main.get_command(parent, name)
    ctx = click.Context(command, info_name=name, parent=parent, max_content_width=100, terminal_width=100)
    return command.get_help(ctx)


def cli_markdown() -> str:
    """The whole reference: the group's help, then one section per command in alphabetical order.

    Returns:
      Markdown text, ending in a newline.
    """
    from sweepkit.cli import COMMANDS

    parts = [HEADER, "## sweepkit\n", "```text\n" + help_text(None).rstrip() + "\n```\n"]
    for name in sorted(COMMANDS):
        parts += [f"## sweepkit {name}\n", "```text\n" + help_text(name).rstrip() + "\n```\n"]
    return "\n".join(parts)


if __name__ == "__main__":
    print(cli_markdown(), end="")
