"""``python -m sweepkit.cli``: the same as the ``sweepkit`` command."""

from sweepkit.cli import main

if __name__ == "__main__":
    main(prog_name="sweepkit")
