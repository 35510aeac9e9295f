"""sweepkit.jaxcache: whole executables kept on disk and loaded back without tracing (in a subprocess, so
that pointing JAX's cache at a temporary folder does not leak into the other tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from hypothesis import given
from hypothesis import strategies as st

SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    import jax, jax.numpy as jnp, numpy as np
    from sweepkit import jaxcache
    folder = Path(sys.argv[1])
    jax.config.update("jax_compilation_cache_dir", str(folder))
    f = jax.jit(lambda x: x * 2.0 + 1.0)
    x = jnp.arange(4.0)
    lowered = []
    def lower():
        lowered.append(1)
        return f.lower(x)
    a = jaxcache.compile_cached("t", ("k", 1), lower)
    files = sorted((folder / "sweepkit-executables").glob("t-*.bin"))
    assert len(files) == 1 and len(lowered) == 1, (files, lowered)
    b = jaxcache.compile_cached("t", ("k", 1), lower)             # from disk: no tracing, no lowering
    assert len(lowered) == 1
    np.testing.assert_array_equal(np.asarray(b(x)), [1.0, 3.0, 5.0, 7.0])
    np.testing.assert_array_equal(np.asarray(a(x)), np.asarray(b(x)))
    jaxcache.compile_cached("t", ("k", 2), lower)                 # another key: another program
    assert len(lowered) == 2 and len(list((folder / "sweepkit-executables").glob("t-*.bin"))) == 2
    files[0].write_bytes(b"not an executable")                     # corrupt: compiled again, never an error
    c = jaxcache.compile_cached("t", ("k", 1), lower)
    assert len(lowered) == 3
    np.testing.assert_array_equal(np.asarray(c(x)), [1.0, 3.0, 5.0, 7.0])
    jaxcache.compile_cached("t", ("k", 1), lower)                 # and rewritten: loads again
    assert len(lowered) == 3
    print("OK")
""")


def test_executables_are_kept_reloaded_and_replaced_when_corrupt(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stderr


def test_cache_off_compiles_without_writing(tmp_path):
    script = SCRIPT.split("folder = Path")[0] + textwrap.dedent("""
        import jax, jax.numpy as jnp
        from sweepkit import jaxcache
        assert not jax.config.jax_compilation_cache_dir
        c = jaxcache.compile_cached("t", (1,), lambda: jax.jit(lambda x: x + 1).lower(jnp.ones(3)))
        assert float(c(jnp.ones(3))[0]) == 2.0
        print("OK")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stderr
    assert not list(tmp_path.rglob("*.bin"))


PROCESS = textwrap.dedent("""
    import sys
    from pathlib import Path
    import jax, jax.numpy as jnp, numpy as np
    from sweepkit import jaxcache
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    f = jax.jit(lambda x: jnp.sin(x) * 2.0 + jnp.cumsum(x))
    x = jnp.arange(8.0)
    lowered = []
    def lower():
        lowered.append(1)
        return f.lower(x)
    c = jaxcache.compile_cached("p", ("k",), lower)
    np.testing.assert_allclose(np.asarray(c(x)), np.sin(np.arange(8.0)) * 2 + np.cumsum(np.arange(8.0)), rtol=1e-6)
    print("LOWERED", len(lowered))
""")


def test_an_executable_saved_by_one_process_runs_in_the_next(tmp_path):
    def run():
        proc = subprocess.run([sys.executable, "-c", PROCESS, str(tmp_path)], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split("LOWERED")[1].strip()

    assert run() == "1"                                   # cold: compiled, saved (and in JAX's cache)
    assert run() == "0"                                   # warm: loaded from disk and run, no lowering
    for f in (tmp_path / "sweepkit-executables").glob("*.bin"):
        f.unlink()
    assert run() == "1"                                   # compiled afresh (not JAX's cached copy) and saved
    assert len(list((tmp_path / "sweepkit-executables").glob("*.bin"))) == 1
    assert run() == "0"                                   # ... so the next process loads it, and it runs


STAGES = textwrap.dedent("""
    import pickle, sys
    import jax, jax.numpy as jnp, numpy as np
    from jax.experimental import serialize_executable
    from sweepkit import jaxcache
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    f = jax.jit(lambda x: jnp.tanh(x) * 3.0 + jnp.cumsum(x * x))
    x = jnp.arange(16.0)
    want = np.tanh(np.arange(16.0)) * 3 + np.cumsum(np.arange(16.0) ** 2)
    stage = sys.argv[2]
    if stage == "jax":                                  # fills JAX's own cache
        f.lower(x).compile()
    elif stage == "plant":                              # JAX's cached copy, re-serialised into our entry
        compiled = f.lower(x).compile()
        path = jaxcache.entry_path("planted", ("k",))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(serialize_executable.serialize(compiled)))
    else:                                               # loads the planted entry: must still give the right answer
        lowered = []
        def lower():
            lowered.append(1)
            return f.lower(x)
        c = jaxcache.compile_cached("planted", ("k",), lower)
        np.testing.assert_allclose(np.asarray(c(x)), want, rtol=1e-5)
        np.testing.assert_allclose(np.asarray(c(x)), want, rtol=1e-5)
        print("LOWERED", len(lowered))
""")


def test_an_entry_that_loads_but_cannot_run_is_replaced_on_its_first_call(tmp_path):
    def stage(name):
        proc = subprocess.run([sys.executable, "-c", STAGES, str(tmp_path), name], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    stage("jax")
    stage("plant")
    lowered = stage("use").split("LOWERED")[1].strip()
    assert lowered in ("0", "1")                          # 1 where the planted copy cannot run (XLA:CPU today)
    if lowered == "1":
        assert stage("use").split("LOWERED")[1].strip() == "0"     # the fresh compile replaced the entry


ON_DEVICE = textwrap.dedent("""
    import sys
    import jax, jax.numpy as jnp, numpy as np
    from sweepkit import jaxcache
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    f = jax.jit(lambda x: jnp.sin(x) * 2.0 + jnp.cumsum(x))
    d1 = jax.local_devices()[1]
    x = jax.device_put(jnp.arange(8.0), d1)
    lowered = []
    def lower():
        lowered.append(1)
        return f.lower(x)
    c = jaxcache.compile_cached("on-device", ("k",), lower, devices=[d1])
    y = c(x)
    assert y.devices() == {d1}, y.devices()
    np.testing.assert_allclose(np.asarray(y), np.sin(np.arange(8.0)) * 2 + np.cumsum(np.arange(8.0)), rtol=1e-6)
    print("LOWERED", len(lowered))
""")


def test_an_executable_for_the_second_of_two_devices_loads_back_onto_it(tmp_path):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}

    def run():
        proc = subprocess.run([sys.executable, "-c", ON_DEVICE, str(tmp_path)], capture_output=True, text=True,
                              timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout.split("LOWERED")[1].strip()

    assert run() == "1"
    assert run() == "0"                                   # loaded onto device 1, not over both devices


# ------------------------------------------------------------------ the source digest in the cache key
MODULE = '''"""A module."""
import math

RATE = 2.0
"""Per second."""


def f(x):
    """Twice x."""
    return RATE * x  # doubled
'''


def _package(root, text=MODULE):
    (root / "pkg" / "sub").mkdir(parents=True, exist_ok=True)
    (root / "pkg" / "a.py").write_text(text)
    (root / "pkg" / "sub" / "b.py").write_text("def g():\n    return 1\n")
    return root / "pkg"


def test_prose_edits_keep_the_digest_and_code_edits_change_it(tmp_path):
    from sweepkit.jaxcache import package_digest

    base = package_digest(_package(tmp_path / "0"))
    prose = MODULE.replace("A module.", "A module, documented\nat length.").replace("# doubled", "# twice")
    prose = prose.replace('"""Per second."""', "# per second\n\n")
    assert package_digest(_package(tmp_path / "1", prose)) == base
    for code in (MODULE.replace("RATE * x", "RATE * x + 0"), MODULE.replace("2.0", "3.0"),
                 MODULE.replace("import math", "import cmath")):
        assert package_digest(_package(tmp_path / "2", code)) != base, code
    (tmp_path / "0" / "pkg" / "sub" / "b.py").rename(tmp_path / "0" / "pkg" / "sub" / "c.py")
    assert package_digest(tmp_path / "0" / "pkg") != base                  # a module's path counts too
    assert package_digest(tmp_path / "empty") is None


def test_code_digests_are_remembered_and_a_bad_memo_is_ignored(tmp_path):
    import json

    from sweepkit.jaxcache import package_digest

    pkg, memo = _package(tmp_path), tmp_path / "cache" / "code-digests.json"
    plain = package_digest(pkg)
    assert package_digest(pkg, memo) == plain and len(json.loads(memo.read_text())) == 2
    entries = json.loads(memo.read_text())
    memo.write_text(json.dumps({k: "f" * 64 for k in entries}))      # the memo is what is read back
    assert package_digest(pkg, memo) != plain
    for bad in ("{not json", "[1, 2]", json.dumps({"x": 1})):
        memo.write_text(bad)
        assert package_digest(pkg, memo) == plain
    assert json.loads(memo.read_text()).keys() >= entries.keys()       # and rewritten whole


@given(doc=st.text(max_size=40), comment=st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
                                                 max_size=40), blank=st.integers(0, 3))
def test_code_text_ignores_any_docstring_comment_and_blank_lines(doc, comment, blank):
    from sweepkit.jaxcache import code_text

    edited = MODULE.replace('"""Twice x."""', repr(doc)).replace("# doubled", "# " + comment)
    edited = edited.replace("\n\n\ndef", "\n" * (blank + 1) + "def")
    assert code_text(edited.encode()) == code_text(MODULE.encode())


def test_the_source_digest_is_one_value_when_lane_threads_ask_together(tmp_path):
    script = textwrap.dedent("""
        import sys
        from concurrent.futures import ThreadPoolExecutor
        import jax
        from sweepkit import jaxcache
        jax.config.update("jax_compilation_cache_dir", sys.argv[1])
        with ThreadPoolExecutor(8) as pool:
            digests = set(pool.map(lambda _: jaxcache.source_digest(), range(32)))
        assert len(digests) == 1 and None not in digests, digests
        print("OK")
    """)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stderr
