"""Catalogue: accelerators, models, number formats and draft kinds, loaded from TOML data files.

Pipeline position: **catalogue** -> cost model -> sweep -> warehouse -> queries -> reports.
"""

from sweepkit.catalogue.devices import (
    Device, device_key, device_names, devices_file, get_device, load_devices, load_devices_file,
)
from sweepkit.catalogue.formats import Format, format_names, get_format, load_formats
from sweepkit.catalogue.model_registry import (
    Draft,
    draft_names,
    get_draft,
    get_model,
    is_config_path,
    load_hf_config,
    load_models_file,
    load_models,
    model_from_hf_config,
    model_key,
    model_names,
    register_model,
)
from sweepkit.catalogue.models import Model

__all__ = [
    "Device", "Draft", "Format", "Model", "device_key", "model_key",
    "device_names", "devices_file", "draft_names", "format_names", "model_names",
    "get_device", "get_draft", "get_format", "get_model",
    "is_config_path", "load_devices", "load_devices_file", "load_formats", "load_hf_config", "load_models",
    "load_models_file", "model_from_hf_config", "register_model",
]
