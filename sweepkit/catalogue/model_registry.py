"""Model registry: HF ``config.json`` fields -> :class:`~sweepkit.catalogue.models.Model`, the packaged catalogue
(``models.toml``), models a file or a config path registers, and draft kinds.

Any HF ``config.json`` loads the same way as a catalogue entry (:func:`model_from_hf_config`): the dense fields
below, plus the mixture-of-experts, MLA and sparse-attention fields of :mod:`sweepkit.catalogue.sparse` and the
windowed-attention and checkpoint-format fields of :mod:`sweepkit.catalogue.attention` and the Gated DeltaNet fields
of hybrid models (:mod:`sweepkit.catalogue.linear`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Mapping

from sweepkit.catalogue._toml import read_packaged
from sweepkit.catalogue.aliases import resolve, unknown
from sweepkit.catalogue.attention import (attention_weight_format, canonical_config, expert_weight_format, mtp_layers, native_weight_format,
                                         window_fields)
from sweepkit.catalogue.linear import linear_fields
from sweepkit.catalogue.models import Model
from sweepkit.catalogue.sparse import dsa_fields, mla_fields, moe_fields
from sweepkit.errors import InputError, bad_value

MAX_DIMENSION = 1 << 24
"""Largest layer count, width, head count or vocabulary a config may give."""
_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")


@dataclass(frozen=True)
class Draft:
    """A speculative draft.

    Attributes:
      kind: ``none``, ``mtp`` (DeepSeek-V3 style: one extra target layer sharing embedding and LM head) or
        ``model`` (a separate small model, its own weights and KV).
      name: ``none``, ``mtp`` or the draft model's catalogue key.
      model: the network the draft runs per pass (for MTP: the target with one layer), None for ``none``.
      resident_params: parameters the draft adds to HBM (MTP: one layer; a model: all of it).
    """

    kind: str
    name: str
    model: Model | None
    resident_params: int

    @property
    def present(self) -> bool:
        return self.kind != "none"


def model_from_hf_config(config: Mapping[str, Any], name: str = "custom", where: str | None = None) -> Model:
    """Build a :class:`Model` from the fields of a HF ``config.json``; bad or missing fields raise InputError."""
    where = where or f"model {name!r}"
    config = canonical_config(config, where)
    missing = [k for k in _REQUIRED if k not in config]
    if missing:
        raise InputError(f"{where}: config.json is missing {', '.join(missing)}; a dense decoder config needs "
                         f"{', '.join(_REQUIRED)} (num_key_value_heads, head_dim, tie_word_embeddings optional)")

    def positive_int(key: str, default: Any = None) -> int:
        value = config.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DIMENSION:
            raise bad_value(key, value, f"an integer in [1, {MAX_DIMENSION:,}]", where=where)
        return value

    d = positive_int("hidden_size")
    heads = positive_int("num_attention_heads")
    kv_heads = positive_int("num_key_value_heads", heads)
    if heads % kv_heads:
        raise bad_value("num_key_value_heads", kv_heads, f"a divisor of num_attention_heads = {heads}", where=where)
    head_dim = positive_int("head_dim", d // heads if d % heads == 0 else None)
    layers = positive_int("num_hidden_layers")
    sparse = {**moe_fields(config, layers, where), **mla_fields(config, where),
              **window_fields(config, layers, where), **dsa_fields(config, layers, where),
              "mtp_layers": mtp_layers(config, where),
              "native_weight_format": native_weight_format(config, where)}
    if sparse.get("index_topk") and sparse.get("window_layers"):
        raise InputError(f"{where}: index_topk = {sparse['index_topk']} on a model with {sparse['window_layers']} "
                         f"windowed layers; sweepkit models sparse attention (index_*) on full-attention models only")
    sparse.update(linear_fields(config, layers, where))
    mixed = [k for k in ("kv_lora_rank", "index_topk", "window_layers") if sparse.get(k)]
    if sparse.get("linear_layers") and mixed:
        raise InputError(f"{where}: {mixed[0]} = {sparse[mixed[0]]} on a model with {sparse['linear_layers']} "
                         f"linear_attention layers; sweepkit models Gated DeltaNet beside full GQA attention only")
    sparse["expert_weight_format"] = expert_weight_format(config, sparse["native_weight_format"],
                                                          sparse.get("n_experts", 0) > 0, where)
    sparse["attention_weight_format"] = attention_weight_format(config, sparse["native_weight_format"], where)
    if config["shared_allreduce"] and sparse.get("n_experts", 0) > 0:
        raise InputError(f"{where}: shared_allreduce (one all-reduce of attention + MLP per layer) on a model with "
                         f"{sparse['n_experts']} experts; sweepkit prices a shared all-reduce on dense models only")
    return Model(
        name=name, n_layers=layers, d_model=d, n_heads=heads, n_kv_heads=kv_heads,
        head_dim=head_dim, d_ff=positive_int("intermediate_size"), vocab=positive_int("vocab_size"),
        tied_embeddings=bool(config.get("tie_word_embeddings", False)), gated_mlp=config["gated_mlp"],
        shared_allreduce=config["shared_allreduce"],
        qkv_bias=bool(config.get("attention_bias", False)),
        source=str(config.get("source", where)), official_params=config.get("official_params"),
        official_active_params=config.get("official_active_params"), **sparse,
    )


def load_hf_config(path: str | Path, name: str | None = None) -> Model:
    """Load any HF ``config.json`` from disk as a :class:`Model` (name defaults to the parent folder)."""
    from sweepkit.inputs import read_text

    path = Path(path)
    try:
        config = json.loads(read_text(path, "config.json"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(config, dict):
        raise InputError(f"{path}: expected a JSON object of HF config fields")
    return model_from_hf_config(config, name=name or path.parent.name or path.stem, where=str(path))


@cache
def load_models() -> dict[str, Model]:
    raw = read_packaged("models.toml")["models"]
    return {k: model_from_hf_config(v, name=k, where=f"models.toml [models.{k}]") for k, v in raw.items()}


def model_names() -> list[str]:
    """Catalogue models, then those a models file or config.json registered in this process."""
    return list(dict.fromkeys([*load_models(), *_REGISTERED]))


def load_models_file(path: str | Path, where: str | None = None) -> list[str]:
    """Register the ``[models.<name>]`` tables of a TOML file (the packaged models.toml's format).

    Args:
      path: the file.  where: the label messages start with (default: the path).

    Returns:
      The names it defines, in file order; each is then known to :func:`get_model`.

    Raises:
      InputError: an unreadable file, no ``[models]`` table, a name the catalogue already has, or bad fields.
    """
    import tomllib

    from sweepkit.inputs import read_text

    where = str(path) if where is None else where
    try:
        raw = tomllib.loads(read_text(path, "models file (TOML)", where=where))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML ({exc}); expected [models.<name>] tables") from None
    entries = raw.get("models")
    if not isinstance(entries, dict) or not entries or set(raw) != {"models"}:
        raise InputError(f"{where}: expected only [models.<name>] tables of HF config fields")
    for name, fields in entries.items():
        if resolve(name, "models", load_models()) is not None:
            raise bad_value(f"models.{name}", name, "a name the catalogue does not have", where=where)
        if not isinstance(fields, dict):
            raise bad_value(f"models.{name}", fields, "a table of HF config fields", where=where)
        register_model(model_from_hf_config(fields, name=name, where=f"{where} [models.{name}]"))
    return list(entries)


_REGISTERED: dict[str, Model] = {}
"""Models loaded from a ``config.json`` path in this process, by the path text that named them."""


def is_config_path(name: str) -> bool:
    """Whether a model name is a path to a HF ``config.json`` (it ends in ``.json``)."""
    return name.endswith(".json")


def register_model(model: Model) -> Model:
    """Make ``model`` known to :func:`get_model` under ``model.name`` (a grid's ``config.json`` path)."""
    _REGISTERED[model.name] = model
    return model


def get_model(name: str, field: str = "model") -> Model:
    """A model by catalogue name, or by the path of a HF ``config.json`` (loaded once, then known by that path).

    Raises:
      InputError: an unknown name (the message lists the known ones), or a bad config.json.
    """
    models = load_models()
    if isinstance(name, str) and name in models:
        return models[name]
    if isinstance(name, str) and name in _REGISTERED:
        return _REGISTERED[name]
    if isinstance(name, str) and is_config_path(name):
        return register_model(load_hf_config(name, name=name))
    key = resolve(name, "models", models)
    if key is not None:
        return models[key]
    raise unknown(field, name, models, ["a HF id of a catalogue model", "a path to a HF config.json"])


def model_key(name: str) -> str | None:
    """The catalogue key a model alias or HF id stands for (``openai/gpt-oss-120b`` -> ``gpt-oss-120b``), or None."""
    return resolve(name, "models", load_models())


def draft_names() -> list[str]:
    return ["none", "mtp", *model_names()]


def get_draft(name: str, target: Model, field: str = "draft") -> Draft:
    """Resolve a draft name against its target: ``none``, ``mtp`` or a catalogue model sharing the vocab.

    ``mtp`` is one extra target layer sharing the embedding and LM head, on any target: on a checkpoint that
    ships MTP layers (``Model.mtp_layers`` > 0: DeepSeek-V3/R1, GLM-4.5, GLM-4.5-Air) it prices that layer;
    on any other (Llama, Qwen, gpt-oss, Kimi-K2) it is a modelled hypothetical head, as the seed chapter's
    MTP head on llama-3-8b is, and is accepted without a warning so the seed's grids reproduce.
    """
    if name == "none":
        return Draft(kind="none", name="none", model=None, resident_params=0)
    if name == "mtp":
        mtp = target.with_layers(1, name=f"{target.name}-mtp")
        return Draft(kind="mtp", name="mtp", model=mtp, resident_params=target.params_per_layer)
    known = isinstance(name, str) and (name in _REGISTERED or is_config_path(name)
                                       or resolve(name, "models", load_models()) is not None)
    if not known:
        raise unknown(field, name, draft_names(), ["a path to a HF config.json"])
    model = get_model(name, field)
    if model.vocab != target.vocab:
        raise InputError(f"{field} = {name!r} has vocab {model.vocab} but target {target.name!r} has "
                         f"{target.vocab}; a draft must share the target's vocabulary")
    return Draft(kind="model", name=name, model=model, resident_params=model.resident_params)
