"""Acceptance models as data, and the sampler of accepted drafts (pure numpy, for the serving simulator).

``sweepkit/catalogue/acceptance.toml`` holds named acceptance tables, each with its source and convention
(EAGLE's per-position rates, DeepSeek-V3's MTP acceptance, mean acceptance lengths), and the acceptance of
each workload per draft kind (``mtp``: a head on the target's features; ``draft-model``: a separate small
model). :func:`load_acceptance` reads and validates it (or another file of the same form);
:func:`workload_alphas` gives a workload's per-position alphas; :func:`sample_accepted` draws accepted drafts
per pass from uniforms, so that one uniform per (request, pass) keeps common random numbers across levers.

The maths (E, the speed-up, tau -> alpha) is in :mod:`sweepkit.speculative`; docs/acceptance.md explains the
conventions (conditional vs unconditional rates, chain vs tree drafts, tau counting the bonus token).
"""

from __future__ import annotations

import math
import numbers
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from sweepkit.errors import InputError, bad_value, short

DRAFT_KINDS = ("mtp", "draft-model")
"""Draft kinds a workload can carry acceptance for; a lever's draft maps to one (:func:`draft_kind`)."""

FORMS = (("alpha",), ("alphas",), ("alpha_1", "decay"), ("tau", "tau_gamma"), ("table",))
"""The ways an entry can give its model (exactly one)."""

_KEYS = {"alpha", "alphas", "alpha_1", "decay", "tau", "tau_gamma", "table", "scale", "source", "convention"}


@dataclass(frozen=True)
class AcceptanceModel:
    """One acceptance model: per-position conditional alphas, with where they come from.

    Attributes:
      name: the table's name, or ``workload/draft-kind``.
      alphas: conditional acceptance at positions 1..len (positions after the last repeat the last value).
      decay: r of a decaying model (alpha_i = alphas[0] r^(i-1) for every i), else None.
      source: the publication or repository the numbers come from.  convention: how they were measured.
    """

    name: str
    alphas: tuple[float, ...]
    decay: float | None
    source: str
    convention: str

    def alphas_for(self, gamma: int) -> np.ndarray:
        """[gamma] float64 conditional alphas for a draft of ``gamma`` tokens."""
        if self.decay is not None:
            return np.clip(self.alphas[0] * self.decay ** np.arange(gamma, dtype=np.float64), 0.0, 1.0)
        table = np.asarray(self.alphas, dtype=np.float64)
        return table[np.minimum(np.arange(gamma), table.size - 1)]


@dataclass(frozen=True)
class AcceptanceCatalogue:
    """Named tables and the per-workload models of one acceptance file (``path``)."""

    path: str
    tables: Mapping[str, AcceptanceModel]
    workloads: Mapping[tuple[str, str], AcceptanceModel]


def draft_kind(draft: str) -> str:
    """The draft kind of a lever's or grid's draft: ``mtp`` stays, any catalogue draft model is ``draft-model``."""
    if draft == "none":
        raise bad_value("draft", draft, "a draft (mtp or a draft model): without one nothing is accepted")
    return "mtp" if draft == "mtp" else "draft-model"


def sample_accepted(u: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """Accepted drafts per pass, k = #{j <= gamma : u < prod_{i<=j} alpha_i}, so P(k >= j) = prod_{i<=j} alpha_i.

    The first rejection ends a pass; inverting the survival function with one uniform per pass keeps common
    random numbers: the same u gives k non-decreasing in every alpha_i, and for equal alphas the same k as
    ``min(floor(ln u / ln alpha), gamma)``.

    Args:
      u: [N, P] uniforms in [0, 1), one per request and pass.
      alphas: [gamma] conditional acceptances (every request), or [N, gamma] (one row per request), in [0, 1].

    Returns:
      [N, P] int64 accepted drafts in [0, gamma].

    Example:
      >>> sample_accepted(np.array([[0.1, 0.5, 0.7, 0.99]]), np.array([0.8, 0.75, 0.5])).tolist()
      [[3, 2, 1, 0]]
    """
    u = np.asarray(u, dtype=np.float64)
    survival = np.cumprod(np.asarray(alphas, dtype=np.float64), axis=-1)
    survival = np.broadcast_to(survival, (u.shape[0], survival.shape[-1]))
    k = np.zeros(u.shape, dtype=np.int64)
    for j in range(survival.shape[1]):
        k += u < survival[:, j:j + 1]
    return k


def expected_tokens_np(alphas: np.ndarray) -> float:
    """E = 1 + sum_k prod_{i<=k} alpha_i for one draft (numpy twin of speculative.expected_tokens_positional)."""
    return float(1.0 + np.cumprod(np.asarray(alphas, dtype=np.float64)).sum())


def iid_alpha_from_tau(tau: float, gamma: int) -> float:
    """The i.i.d. alpha with E(alpha, gamma) = tau, by bisection (numpy twin of speculative.alpha_from_tau)."""
    lo, hi = 0.0, 1.0
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if expected_tokens_np(np.full(gamma, mid)) < tau else (lo, mid)
    return 1.0 if tau >= gamma + 1 else 0.5 * (lo + hi)


def load_acceptance(path: str | Path | None = None) -> AcceptanceCatalogue:
    """Read and validate an acceptance file (default: the packaged ``sweepkit/catalogue/acceptance.toml``).

    Raises:
      InputError: unreadable file or bad content, one line naming the file, the field, the value and what
        is allowed.
    """
    if path is None:
        where = "sweepkit/catalogue/acceptance.toml"
        text = resources.files("sweepkit.catalogue").joinpath("acceptance.toml").read_text(encoding="utf-8")
    else:
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise InputError(f"{where}: no such acceptance file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{where}: cannot read the acceptance file ({exc.__class__.__name__})") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML: {exc}") from None
    for key in raw:
        if key not in ("tables", "workloads"):
            raise bad_value(key, key, "a top-level table among tables, workloads", where=where)
    tables: dict[str, AcceptanceModel] = {}
    for name, entry in _table(raw.get("tables", {}), "tables", where).items():
        tables[name] = _model(name, _table(entry, f"tables.{name}", where), f"tables.{name}", where, {})
    workloads: dict[tuple[str, str], AcceptanceModel] = {}
    for workload, kinds in _table(raw.get("workloads", {}), "workloads", where).items():
        for kind, entry in _table(kinds, f"workloads.{workload}", where).items():
            field = f"workloads.{workload}.{kind}"
            if kind not in DRAFT_KINDS:
                raise bad_value(field, kind, "a draft kind among " + ", ".join(DRAFT_KINDS), where=where)
            entry = {"table": entry} if isinstance(entry, str) else _table(entry, field, where)
            workloads[(workload, kind)] = _model(f"{workload}/{kind}", entry, field, where, tables)
    return AcceptanceCatalogue(path=where, tables=tables, workloads=workloads)


def get_table(name: str, catalogue: AcceptanceCatalogue | None = None) -> AcceptanceModel:
    """A named acceptance table (``sweepkit/catalogue/acceptance.toml``'s [tables]); InputError if unknown."""
    catalogue = catalogue or load_packaged()
    if name not in catalogue.tables:
        raise bad_value("acceptance", name, sorted(catalogue.tables), where=catalogue.path)
    return catalogue.tables[name]


def workload_alphas(workload: str, draft: str, gamma: int,
                    catalogue: AcceptanceCatalogue | None = None) -> tuple[np.ndarray, AcceptanceModel]:
    """A workload's per-position alphas for a draft of ``gamma`` tokens, and the model they come from.

    Args:
      workload: a workload name of the file's [workloads] (chat, coding-agent, ...).
      draft: the lever's draft (``mtp`` or a catalogue draft model; see :func:`draft_kind`).
      gamma: drafted tokens per pass, integer >= 1.
      catalogue: an acceptance file's contents (default: the packaged file).

    Returns:
      ([gamma] float64 conditional alphas, the :class:`AcceptanceModel`).

    Example:
      >>> alphas, model = workload_alphas("chat", "mtp", 3)
      >>> alphas.tolist(), model.name
      ([0.75, 0.69, 0.65], 'chat/mtp')
    """
    catalogue = catalogue or load_packaged()
    kind = draft_kind(draft)
    if (workload, kind) not in catalogue.workloads:
        known = sorted({w for w, k in catalogue.workloads if k == kind})
        raise bad_value(f"workloads.{workload}.{kind}", workload, known, where=catalogue.path)
    model = catalogue.workloads[(workload, kind)]
    return model.alphas_for(gamma), model


def parametric(alpha_1: float, decay: float = 1.0) -> AcceptanceModel:
    """The model of a grid's (alpha, decay): ``iid`` when decay is 1, else ``decaying``."""
    return AcceptanceModel(name="iid" if decay == 1.0 else "decaying", alphas=(float(alpha_1),),
                           decay=float(decay), source="the grid", convention="alpha_i = alpha r^(i-1)")


_PACKAGED: list[AcceptanceCatalogue] = []


def load_packaged() -> AcceptanceCatalogue:
    """The packaged acceptance file, read once per process."""
    if not _PACKAGED:
        _PACKAGED.append(load_acceptance())
    return _PACKAGED[0]


def _table(value: Any, field: str, where: str) -> dict:
    if not isinstance(value, dict):
        raise bad_value(field, short(value), "a table", where=where)
    return value


def _number(entry: dict, key: str, field: str, where: str, lo: float, hi: float = math.inf) -> float:
    v = entry[key]
    if not (isinstance(v, numbers.Real) and not isinstance(v, bool) and lo <= v <= hi):
        raise bad_value(f"{field}.{key}", short(v), f"a number in [{lo:g}, {hi:g}]", where=where)
    return float(v)


def _model(name: str, entry: dict, field: str, where: str, tables: Mapping[str, AcceptanceModel]) -> AcceptanceModel:
    for key in entry:
        if key not in _KEYS:
            raise bad_value(f"{field}.{key}", short(entry[key]), "a key among " + ", ".join(sorted(_KEYS)),
                            where=where)
    forms = [f for f in FORMS if f[0] in entry]
    if len(forms) != 1:
        raise InputError(f"{where}: {field} gives {len(forms)} models; give exactly one of alpha, alphas, "
                         f"alpha_1 + decay, tau + tau_gamma, table")
    form, decay, base = forms[0], None, None
    for key in form:
        if key not in entry:
            raise InputError(f"{where}: {field} has {form[0]} but no {key}; give both of " + " + ".join(form))
    if "scale" in entry and form != ("table",):
        raise bad_value(f"{field}.scale", entry["scale"], "scale only beside table", where=where)
    if form == ("alpha",):
        alphas = (_number(entry, "alpha", field, where, 0.0, 1.0),)
    elif form == ("alphas",):
        values = entry["alphas"]
        if not isinstance(values, list) or not values:
            raise bad_value(f"{field}.alphas", short(values), "a non-empty list of numbers in [0, 1]", where=where)
        alphas = tuple(_number({"alphas": v}, "alphas", field, where, 0.0, 1.0) for v in values)
    elif form == ("alpha_1", "decay"):
        alphas, decay = (_number(entry, "alpha_1", field, where, 0.0, 1.0),), _number(entry, "decay", field, where, 0.0)
    elif form == ("tau", "tau_gamma"):
        gamma = entry["tau_gamma"]
        if not (isinstance(gamma, int) and not isinstance(gamma, bool) and gamma >= 1):
            raise bad_value(f"{field}.tau_gamma", short(gamma), "an integer >= 1", where=where)
        alphas = (iid_alpha_from_tau(_number(entry, "tau", field, where, 1.0, gamma + 1.0), gamma),)
    else:
        if entry["table"] not in tables:
            raise bad_value(f"{field}.table", short(entry["table"]), sorted(tables), where=where)
        base = tables[entry["table"]]
        scale = _number(entry, "scale", field, where, 0.0) if "scale" in entry else 1.0
        alphas = tuple(min(1.0, a * scale) for a in base.alphas)
        decay = base.decay
    source = entry.get("source", base.source if base else None)
    if not isinstance(source, str) or not source.strip():
        raise bad_value(f"{field}.source", source, "a non-empty string naming the publication or repository",
                        where=where)
    convention = entry.get("convention", base.convention if base else "")
    if not isinstance(convention, str):
        raise bad_value(f"{field}.convention", short(convention), "a string", where=where)
    return AcceptanceModel(name=name, alphas=alphas, decay=decay, source=source, convention=convention)
