"""Start-up: listing the commands imports no JAX; ``sweepkit.evaluate`` is the function however it is imported."""

import subprocess
import sys

LISTING = """
import sys
from sweepkit.cli import main
try:
    main(["--help"], prog_name="sweepkit")
except SystemExit:
    pass
print(sorted(m for m in ("jax", "jaxlib", "sweepkit.serving", "sweepkit.evaluate") if m in sys.modules))
"""


def test_listing_the_commands_imports_no_jax():
    out = subprocess.run([sys.executable, "-c", LISTING], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_evaluate_is_the_function_after_any_import_of_its_module():
    code = ("import sweepkit.evaluate as m, sweepkit; from sweepkit.evaluate import evaluate; "
            "print(callable(sweepkit.evaluate), sweepkit.evaluate is evaluate, m is evaluate)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True"]
