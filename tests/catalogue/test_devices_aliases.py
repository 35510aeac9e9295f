"""New accelerators (datasheet figures), scale-up/scale-out fields, and alias resolution of names."""

import jax.numpy as jnp
import pytest

from sweepkit.catalogue import device_key, device_names, get_device, get_draft, get_model, load_devices, model_key
from sweepkit.costmodel.arrays import device_arrays
from sweepkit.errors import InputError

NEW = ["GB200", "GB300", "B300", "MI325X", "MI355X", "RTX-PRO-6000", "L40S", "GH200", "GH200-144GB", "H800"]


@pytest.mark.parametrize("name", NEW)
def test_new_devices_have_sources_and_dense_flops(name):
    dev = get_device(name)
    assert any(cite in dev.source for cite in ("nvidia.com", "amd.com", "arXiv"))
    assert dev.peak_flops_per_s <= 2.6e15 and dev.price_illustrative     # dense bf16, never the sparse figure


@pytest.mark.parametrize("name, bf16_tflops, hbm_tb_s, hbm_gb, tdp_w, domain, scaleout_gbit", [
    # GB200 NVL72 datasheet: 360 PF bf16 sparse / 72 GPUs / 2; 576 TB/s and 13.4 TB / 72; NVLink domain of 72.
    ("GB200", 2500, 8.0, 186, 1200, 72, 400),
    # GB300 NVL72 datasheet: same bf16; 288 GB HBM3e per GPU; ConnectX-8 800 Gb/s per GPU.
    ("GB300", 2500, 8.0, 288, 1400, 72, 800),
    # HGX B300: 36 PF bf16 sparse / 8 / 2; ConnectX-8 800 Gb/s.
    ("B300", 2250, 8.0, 288, 1100, 8, 800),
    # MI300X datasheet: 1,307.4 TF bf16 dense, 5.3 TB/s, 192 GB, 750 W.
    ("MI300X", 1307.4, 5.3, 192, 750, 8, 400),
    # MI325X datasheet: 1,307.4 TF bf16 dense, 6 TB/s, 256 GB, 1,000 W.
    ("MI325X", 1307.4, 6.0, 256, 1000, 8, 400),
    # MI355X datasheet: 2.5 PF bf16 dense, 8 TB/s, 288 GB, 1,400 W.
    ("MI355X", 2516.6, 8.0, 288, 1400, 8, 400),
    # RTX PRO 6000 Blackwell Server Edition: 4 PF fp4 sparse -> 0.5 PF bf16 dense; GDDR7 1,597 GB/s, 96 GB, 600 W.
    ("RTX-PRO-6000", 503.8, 1.597, 96, 600, 8, 400),
    # L40S datasheet: 362.05 TF bf16 dense, 864 GB/s, 48 GB, 350 W.
    ("L40S", 362.05, 0.864, 48, 350, 8, 200),
    ("GH200", 989, 4.0, 96, 1000, 1, 400),
    # GH200 datasheet, HBM3e variant: the same H100 tensor cores with 144 GB at 4.9 TB/s.
    ("GH200-144GB", 989, 4.9, 144, 1000, 1, 400),
    ("H800", 989, 3.35, 80, 700, 8, 400),
])
def test_datasheet_figures(name, bf16_tflops, hbm_tb_s, hbm_gb, tdp_w, domain, scaleout_gbit):
    d = get_device(name)
    got = (d.peak_flops_per_s / 1e12, d.hbm_bytes_per_s / 1e12, d.hbm_capacity_bytes / 1e9, d.tdp_w,
           d.scaleup_domain_gpus, d.scaleout_bytes_per_s * 8 / 1e9)
    assert got == pytest.approx((bf16_tflops, hbm_tb_s, hbm_gb, tdp_w, domain, scaleout_gbit))


def test_native_formats():
    # GB300 / HGX B300: fp4 dense 1,080 PF per 72 GPUs = 6x bf16; INT8 is not a native fast path there.
    assert get_device("GB300").speedup("fp4") == 6.0 and get_device("GB300").speedup("int8") == 1.0
    assert get_device("B300").speedup("nvfp4") == 6.0 and get_device("GB200").speedup("fp4") == 4.0
    # MI355X: 10.1 PF MXFP6 / MXFP4 = 4x bf16; MI325X fp8 2x; Ada L40S fp8 2x; RTX PRO 6000 fp4 4x.
    assert (get_device("MI355X").speedup("fp6"), get_device("MI355X").speedup("fp4")) == (4.0, 4.0)
    assert get_device("MI325X").speedup("fp8") == 2.0 and get_device("MI325X").speedup("fp4") == 1.0
    assert get_device("MI300X").speedup("fp8") == 2.0          # 2,614.9 / 1,307.4 TF dense (datasheet)
    assert get_device("L40S").speedup("fp8") == 2.0 and get_device("RTX-PRO-6000").speedup("fp4") == 4.0
    # NVLink5 1.8 TB/s per GPU is 900 GB/s each way; PCIe parts have no NVLink.
    assert get_device("GB200").link_bytes_per_s == 900e9 and get_device("L40S").link == "pcie4"


def test_existing_devices_keep_hgx_defaults():
    for name in ["H100", "H200", "B200", "MI300X"]:
        assert (get_device(name).scaleup_domain_gpus, get_device(name).scaleout_bytes_per_s) == (8, 50e9)
    assert get_device("A100").scaleout_bytes_per_s == 25e9           # DGX A100: 200 Gb/s HDR per GPU


def test_device_arrays_carry_the_domain_fields():
    arrays = device_arrays([get_device("H100"), get_device("GB200")], jnp.float32)
    assert arrays.scaleup_domain_gpus.tolist() == [8.0, 72.0]
    assert arrays.scaleout_bytes_per_s.tolist() == pytest.approx([50e9, 50e9])


@pytest.mark.parametrize("spelling, key", [
    ("H100 SXM", "H100"), ("H100 SXM (80GB HBM3)", "H100"), ("h100-sxm5-80gb", "H100"),
    ("H200 (141GB HBM3; doc says 131GB)", "H200"), ("GB200 NVL72", "GB200"), ("B200 (HGX)", "B200"),
    ("A100-SXM4-80GB", "A100"), ("A100 (80GB)", "A100"), ("RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000"),
    ("GH200 (480GB)", "GH200"), ("GH200 144GB HBM3e", "GH200-144GB"),
    ("GH200-GraceHopper-Superchip_GH200-144GB_aarch64x1", "GH200-144GB"), ("gb300", "GB300"), ("AMD Instinct MI355X", "MI355X"),
    ("H100 (80GB), 8 per node, InfiniBand", "H100"),
])
def test_device_spellings(spelling, key):
    assert get_device(spelling).name == key and device_key(spelling) == key


@pytest.mark.parametrize("hf_id, key", [
    ("deepseek-ai/DeepSeek-R1", "deepseek-v3"), ("deepseek-ai/DeepSeek-R1-0528", "deepseek-v3"),
    ("openai/gpt-oss-120b", "gpt-oss-120b"), ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.1-70b"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3-235b-a22b"), ("Qwen/Qwen3-32B", "qwen3-32b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"), ("meta-llama/Llama-2-70b-hf", "llama-2-70b"),
    ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"), ("zai-org/GLM-4.5-Air", "glm-4.5-air"),
    ("moonshotai/Kimi-K2-Instruct", "kimi-k2"), ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4-maverick"),
    ("deepseek-ai/DeepSeek-R1 (NVFP4)", "deepseek-v3"), ("deepseek-r1", "deepseek-v3"),
    ("deepseek-ai/DeepSeek-R1 / V3 (NVFP4 MoE)", "deepseek-v3"),
])
def test_hf_ids_resolve_to_catalogue_models(hf_id, key):
    assert get_model(hf_id).name == key and model_key(hf_id) == key


def test_unknown_names_list_close_matches_first():
    with pytest.raises(InputError, match=r"device = 'GB2OO' is not allowed; expected one of GB200, H100, "):
        get_device("GB2OO")
    with pytest.raises(InputError, match=r"model = 'gpt-oss-12b' is not allowed; expected one of gpt-oss-120b"):
        get_model("gpt-oss-12b")
    with pytest.raises(InputError, match="a HF id of a catalogue model"):
        get_model("openai/gpt-5")
    assert model_key("RTX 3090 (per text)") is None and device_key("RTX 3090") is None


def test_a_draft_may_be_named_by_hf_id():
    draft = get_draft("meta-llama/Llama-3.2-1B-Instruct", get_model("meta-llama/Llama-3.1-8B-Instruct"))
    assert draft.model.name == "llama-3.2-1b"


def test_a_grid_stores_catalogue_names_for_aliases(tmp_path):
    from sweepkit.sweep.grid import load_grid

    grid = tmp_path / "g.toml"
    grid.write_text('name = "g"\n[axes]\ndevice = ["GB200 NVL72", "H100"]\nmodel = ["openai/gpt-oss-20b"]\n')
    assert load_grid(grid).axes["device"] == ("GB200", "H100")
    assert load_grid(grid).axes["model"] == ("gpt-oss-20b",)
    grid.write_text('name = "g"\n[axes]\ndevice = ["H100 SXM", "H100"]\n')
    with pytest.raises(InputError, match="distinct values"):
        load_grid(grid)


def test_every_alias_names_a_catalogue_entry():
    from sweepkit.catalogue.aliases import alias_table
    from sweepkit.catalogue import load_models

    assert set(alias_table("models").values()) <= set(load_models())
    assert set(alias_table("devices").values()) <= set(load_devices()) and set(NEW) <= set(device_names())


def test_measurement_rows_naming_hf_ids_and_vendor_spellings_are_modelled():
    from sweepkit.validation.measurements import parse_measurements
    from sweepkit.validation.points import evaluate_points

    head = ("source,url,framework,device,tp,gpus,model,weight_format,kv_format,compute_format,batch,"
            "context_tokens,input_tokens,output_tokens,requests,concurrency,request_rate,percentile,ttft_limit_s,"
            "tpot_limit_s,draft,gamma,metric,value,unit,split,notes\n")
    rows = ("t,https://example.org,vLLM,GB200 NVL72,1,,openai/gpt-oss-120b,fp4,,,8,4096,,,,,,,,,,,step_time,5,ms,"
            "train,\nt,https://example.org,vLLM,H100 SXM (80GB HBM3),1,,meta-llama/Llama-3.1-8B-Instruct,bf16,,,1,"
            "512,,,,,,,,,,,step_time,7,ms,train,\n")
    ms = parse_measurements(head + rows, "m.csv")
    assert [(m.device, m.model) for m in ms] == [("GB200", "gpt-oss-120b"), ("H100", "llama-3.1-8b")]
    values = evaluate_points(ms, serving=False)
    assert all(v is not None and 0 < v < 1 for v in values)
