"""Compilation caches for the CLI: a grid shape compiles once per machine, not per process.

The cache lives in ``$SWEEPKIT_JAX_CACHE`` (default ``~/.cache/sweepkit/jax``); ``SWEEPKIT_JAX_CACHE=off``
turns it off. There JAX keeps the XLA compilations of programs that took at least MIN_COMPILE_S to
compile, and :func:`compile_cached` keeps whole executables (``sweepkit-executables/``) so that a warm run
also skips tracing and lowering.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import pickle
import tempfile
import threading
from pathlib import Path

MIN_COMPILE_S = 0.5


def enable_persistent_cache() -> Path | None:
    """Point JAX's compilation cache at the sweepkit cache folder; returns it (None when turned off)."""
    setting = os.environ.get("SWEEPKIT_JAX_CACHE", "")
    if setting.lower() in ("off", "0", "none"):
        return None
    path = Path(setting).expanduser() if setting else Path.home() / ".cache" / "sweepkit" / "jax"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None                      # a read-only home: compile every time, never fail because of it
    import jax

    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_S)
    return path


# ---------------------------------------------------------------------------------------- executables
# JAX's cache above saves the XLA compile, but a warm process still traces and lowers the program first,
# before its first row. For the few programs the CLI runs per grid shape, the compiled executable itself is
# kept: serialised after its first compile and loaded back without tracing. The key covers everything the program depends on: sweepkit's version and
# code (its syntax trees: an edit of comments or docstrings keeps the cache), jax/jaxlib versions, the
# backend, device kind and count, the host CPU, x64, XLA_FLAGS, the function, its static arguments and
# argument shapes, and the devices it runs on when not all of them.

class _CacheHits:
    """Executables JAX has loaded from its persistent cache in this process (listener added on first use)."""

    count = 0
    listening = False

    @classmethod
    def _on_event(cls, event: str, **_) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            cls.count += 1

    @classmethod
    def now(cls) -> int:
        if not cls.listening:
            import jax

            jax.monitoring.register_event_listener(cls._on_event)
            cls.listening = True
        return cls.count


def _executables_dir() -> Path | None:
    """``<JAX's cache folder>/sweepkit-executables``; None while JAX's persistent cache is off."""
    import jax

    root = jax.config.jax_compilation_cache_dir
    return Path(root) / "sweepkit-executables" if root else None


def source_digest() -> str | None:
    """sha256 over the code of every module of the installed sweepkit package (path and syntax tree, without
    comments, docstrings and line numbers: :func:`code_text`), so that editing prose keeps the cached
    programs; None when the sources are not there to read (a .pyc-only or zipped install: then nothing is
    cached). Each module's code digest is remembered by the sha256 of its bytes in ``code-digests.json``
    next to the executables, so that a process parses only the modules whose bytes changed. Computed once per
    process, under a lock: the lane threads ask for it together, and CPython 3.11's parser is not safe to
    run on several threads at once ("AST constructor recursion depth mismatch")."""
    with _DIGEST_LOCK:
        return _source_digest()


_DIGEST_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _source_digest() -> str | None:
    folder = _executables_dir()
    return package_digest(Path(__file__).resolve().parent, folder / "code-digests.json" if folder else None)


def package_digest(pkg: Path, memo_path: Path | None = None) -> str | None:
    """:func:`source_digest` of the package in folder ``pkg``, with its memo at ``memo_path`` (None: none)."""
    paths = sorted(pkg.rglob("*.py")) if pkg.is_dir() else []
    if not paths:
        return None
    memo = _read_memo(memo_path)
    h, fresh = hashlib.sha256(), {}
    for path in paths:
        raw = path.read_bytes()
        raw_sha = hashlib.sha256(raw).hexdigest()
        fresh[raw_sha] = memo.get(raw_sha) or hashlib.sha256(code_text(raw)).hexdigest()
        h.update(str(path.relative_to(pkg)).encode())
        h.update(fresh[raw_sha].encode())
    if memo_path is not None and not fresh.items() <= memo.items():
        _write_memo(memo_path, fresh if len(memo) > 4 * len(paths) else {**memo, **fresh})   # bounded
    return h.hexdigest()


def _read_memo(path: Path | None) -> dict:
    try:
        memo = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        return {}
    if not isinstance(memo, dict):
        return {}
    return {k: v for k, v in memo.items() if isinstance(k, str) and isinstance(v, str)}


def _write_memo(path: Path, memo: dict) -> None:
    """Replace the memo atomically; a read-only cache folder is not an error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _replace(path, json.dumps(memo).encode())
    except OSError:
        pass


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file beside it, then renamed); no temporary file is
    left behind when it fails."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        _discard(Path(tmp))
        raise


def code_text(source: bytes) -> bytes:
    """A module's code as the cache key sees it: its syntax tree dumped without line numbers, every string
    statement (docstrings, attribute docs) dropped; comments never reach the tree. The bytes themselves
    where they do not parse.

    Example:
      >>> documented = b"def f(x):\\n    'Twice x.'\\n    return 2 * x  # doubled\\n"
      >>> code_text(documented) == code_text(b'def f(x):\\n    return 2*x\\n')
      True
      >>> code_text(documented) == code_text(b'def f(x):\\n    return 3 * x\\n')
      False
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, SystemError, RecursionError):
        return source
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                kept = [s for s in stmts if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                                 and isinstance(s.value.value, str))]
                setattr(node, field, kept or [ast.Pass()])
    return ast.dump(tree).encode()


@functools.lru_cache(maxsize=1)
def _host_cpu() -> str:
    """The host CPU's model and feature flags (XLA:CPU compiles for them), hashed; '' where unreadable."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    lines = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags", "Features", "CPU part"))]
    return hashlib.sha256("\n".join(sorted(set(lines))).encode()).hexdigest()[:16]


def _compile_fresh(lower, compiler_options):
    """Compile with JAX's persistent cache bypassed (only a fresh compile serialises completely; see above),
    falling back to a plain compile where JAX's internals differ."""
    import jax

    try:
        from jax._src import compilation_cache
        reset = compilation_cache.reset_cache
    except (ImportError, AttributeError):
        return lower().compile(compiler_options=compiler_options)
    before = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    reset()
    try:
        return lower().compile(compiler_options=compiler_options)
    finally:
        jax.config.update("jax_enable_compilation_cache", before)
        reset()                                            # re-reads the folder at the next compile


def entry_path(name: str, key: object, compiler_options: dict | None = None, devices=None) -> Path | None:
    """Where :func:`compile_cached` keeps this program (None while JAX's persistent cache is off)."""
    import jax
    import jaxlib

    folder = _executables_dir()
    digest = source_digest()
    if folder is None or digest is None:
        return None
    import sweepkit

    device = jax.devices()[0]
    text = repr((name, key, compiler_options, sweepkit.__version__, jax.__version__, jaxlib.__version__,
                 jax.default_backend(), device.device_kind, jax.device_count(), bool(jax.config.jax_enable_x64),
                 os.environ.get("XLA_FLAGS", ""), _host_cpu(), digest,
                 None if devices is None else [d.id for d in devices]))
    return folder / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:32]}.bin"


def compile_cached(name: str, key: object, lower, compiler_options: dict | None = None, devices=None):
    """``lower().compile(compiler_options)``, or the same executable loaded from the cache folder.

    Args:
      name: the program's name (part of the file name).
      key: anything whose ``repr`` pins the program: static arguments, argument shapes and dtypes, tree
        structures.
      lower: a zero-argument callable returning the ``jax.stages.Lowered`` (only called on a miss).
      compiler_options: passed to ``compile``.
      devices: the devices the program was lowered for when they are not all the backend's (a program
        committed to one device of several): part of the key, and where a cached executable is loaded.

    Returns:
      A callable like ``jax.stages.Compiled``. A missing, unreadable or stale cache entry compiles (and
      rewrites it); an entry that loads but fails on its first call is deleted and the program compiled
      afresh: the cache never makes a run fail.
    """
    path = entry_path(name, key, compiler_options, devices)
    if path is None:
        return lower().compile(compiler_options=compiler_options)
    from jax.experimental import serialize_executable

    try:
        payload, in_tree, out_tree = pickle.loads(path.read_bytes())
        loaded = serialize_executable.deserialize_and_load(payload, in_tree, out_tree,
                                                           execution_devices=devices)
        return _FirstCallChecked(loaded, path, lambda: _compile_and_keep(path, lower, compiler_options))
    except FileNotFoundError:
        pass
    except Exception:  # noqa: BLE001 - a corrupt or incompatible entry: compile again and replace it
        _discard(path)
    return _compile_and_keep(path, lower, compiler_options)


def _discard(path: Path) -> None:
    """Delete a bad entry; a read-only cache folder is not an error."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _compile_and_keep(path: Path, lower, compiler_options):
    from jax.experimental import serialize_executable

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return lower().compile(compiler_options=compiler_options)
    hits = _CacheHits.now()
    compiled = _compile_fresh(lower, compiler_options)
    if _CacheHits.now() != hits:
        # JAX loaded it from its own cache after all: re-serialising such an executable drops the compiled
        # code on XLA:CPU (the loaded copy fails with "Function ... not found"), so keep fresh compiles only.
        return compiled
    try:
        _replace(path, pickle.dumps(serialize_executable.serialize(compiled)))
    except Exception:  # noqa: BLE001 - not serialisable on this backend, or a read-only cache: just don't keep it
        pass
    return compiled


class _FirstCallChecked:
    """An executable loaded from disk: its first call waits for the result, and if it fails (an entry that
    deserialises but cannot run, as XLA:CPU's re-serialised cached executables do) the entry is deleted and
    the call repeated on a fresh compile. Later calls go straight through (asynchronous as usual)."""

    def __init__(self, compiled, path: Path, recompile):
        self._compiled, self._path, self._recompile, self._checked = compiled, path, recompile, False

    def __call__(self, *args):
        if self._checked:
            return self._compiled(*args)
        import jax

        try:
            out = jax.block_until_ready(self._compiled(*args))
        except Exception:  # noqa: BLE001 - a real error raises again from the fresh compile below
            _discard(self._path)
            self._compiled = self._recompile()
            out = self._compiled(*args)
        self._checked = True
        return out
