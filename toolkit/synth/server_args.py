"""The launch of a synthetic run: its command line and the ``server_args`` SGLang would dump.

Fields follow ``ServerArgs`` in class order, resolved as ``__post_init__`` leaves them (auto
values filled in, ``max_running_requests`` still None: the scheduler resolves it later and
prints it in the ``max_total_num_tokens=...`` line). A representative subset, not all ~500.
"""

from __future__ import annotations

from typing import Any

from toolkit.analyze.model import Layout
from toolkit.synth.profiles import Profile

__all__ = ["MODEL_PATH", "cuda_graph_bs", "launch_command", "render_dump", "server_args"]

MODEL_PATH = "moonshotai/Kimi-K2.6"
PORT = 30000
GPU_MEM_MB = 97887  # memory.total of an RTX PRO 6000 Blackwell, MiB


def cuda_graph_bs(max_bs: int) -> list[int]:
    """Default capture sizes: 1, 2, 4, 8, 12, 16…256 by 8, 272…496 by 16, 512… by 32."""
    sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 497, 16), *range(512, 1025, 32)]
    return [b for b in sizes if b <= max_bs]


def graph_max_bs(layout: Layout) -> int:
    """``cuda_graph_max_bs`` on 90–160 GB GPUs: 256 if tp < 4 else 512."""
    return 256 if layout.tp < 4 else 512


def launch_command(layout: Layout) -> str:
    """The ``launch_server`` command line of the layout (flags only where not default)."""
    parts = [
        "python3 -m sglang.launch_server",
        f"--model-path {MODEL_PATH}",
        "--trust-remote-code",
    ]
    if layout.tp > 1:
        parts.append(f"--tp-size {layout.tp}")
    if layout.pp > 1:
        parts.append(f"--pp-size {layout.pp}")
    if layout.pp_async_batch_depth:
        parts.append(f"--pp-async-batch-depth {layout.pp_async_batch_depth}")
    if layout.pp_max_micro_batch_size is not None:
        parts.append(f"--pp-max-micro-batch-size {layout.pp_max_micro_batch_size}")
    if layout.max_running_requests is not None:
        parts.append(f"--max-running-requests {layout.max_running_requests}")
    parts += ["--host 0.0.0.0", f"--port {PORT}"]
    return " ".join(parts)


def _mem_fraction_static(layout: Layout) -> float:
    """0.5.5's heuristic: reserve 512 MB + 1.5·chunk + 2·graph bs + tp·pp/8 GB, in MB."""
    chunk = max(layout.chunked_prefill_size, 2048)
    reserved = 512 + chunk * 1.5 + graph_max_bs(layout) * 2 + layout.tp * layout.pp / 8 * 1024
    return round((GPU_MEM_MB - reserved) / GPU_MEM_MB, 3)


def server_args(layout: Layout, profile: Profile, seed: int) -> dict[str, Any]:
    """The resolved ``ServerArgs`` of the layout, as the profile's release names them."""
    max_bs = graph_max_bs(layout)
    bs = cuda_graph_bs(max_bs)
    graph: dict[str, Any]
    if profile.new_startup:
        # ≥0.5.16 splits the CUDA-graph settings per phase and nests them in a record.
        graph = {
            "cuda_graph_max_bs_decode": max_bs,
            "cuda_graph_max_bs_prefill": None,
            "cuda_graph_bs_decode": bs,
            "cuda_graph_bs_prefill": None,
            "cuda_graph_backend_decode": "full",
            "cuda_graph_backend_prefill": "eager",
            "cuda_graph_config": {
                "decode": {"backend": "full", "max_bs": max_bs, "bs": bs, "tc_compiler": "eager"},
                "prefill": {"backend": "eager", "max_bs": None, "bs": [], "tc_compiler": "eager"},
            },
            "disable_cuda_graph": False,
            "disable_decode_cuda_graph": False,
            "disable_prefill_cuda_graph": True,
        }
    else:
        graph = {"cuda_graph_max_bs": max_bs, "cuda_graph_bs": bs, "disable_cuda_graph": False}
    args: dict[str, Any] = {
        "model_path": MODEL_PATH,
        "tokenizer_path": MODEL_PATH,
        "tokenizer_mode": "auto",
        "tokenizer_worker_num": 1,
        "skip_tokenizer_init": False,
        "load_format": "auto",
        "model_loader_extra_config": "{}",
        "trust_remote_code": True,
        "context_length": None,
        "is_embedding": False,
        "enable_multimodal": None,
        "revision": None,
        "model_impl": "auto",
        "host": "0.0.0.0",
        "port": PORT,
        "skip_server_warmup": False,
        "warmups": None,
        "nccl_port": None,
        "dtype": "auto",
        "quantization": None,
        "quantization_param_path": None,
        "kv_cache_dtype": "auto",
        "enable_fp32_lm_head": False,
        "mem_fraction_static": _mem_fraction_static(layout),
        "max_running_requests": layout.max_running_requests,
        "max_queued_requests": None,
        "max_total_tokens": None,
        "chunked_prefill_size": layout.chunked_prefill_size,
        "max_prefill_tokens": 16384,
        "schedule_policy": "fcfs",
        "enable_priority_scheduling": False,
        "schedule_conservativeness": 1.0,
        "page_size": 1,
        "swa_full_tokens_ratio": 0.8,
        "disable_hybrid_swa_memory": False,
        "radix_eviction_policy": "lru",
        "device": "cuda",
        "tp_size": layout.tp,
        "pp_size": layout.pp,
        "pp_max_micro_batch_size": layout.pp_max_micro_batch_size,
        "pp_async_batch_depth": layout.pp_async_batch_depth,
        "stream_interval": 1,
        "stream_output": False,
        "random_seed": 1_000_003 * (seed + 1) % 999_999_937,
        "constrained_json_whitespace_pattern": None,
        "watchdog_timeout": 300,
        "dist_timeout": None,
        "download_dir": None,
        "base_gpu_id": 0,
        "gpu_id_step": 1,
        "sleep_on_idle": False,
        "log_level": "info",
        "log_level_http": None,
        "log_requests": False,
        "log_requests_level": 2,
        "crash_dump_folder": None,
        "show_time_cost": False,
        "enable_metrics": False,
        "enable_metrics_for_all_schedulers": False,
        "bucket_time_to_first_token": None,
        "bucket_inter_token_latency": None,
        "bucket_e2e_request_latency": None,
        "collect_tokens_histogram": False,
        "decode_log_interval": 40,
        "enable_request_time_stats_logging": False,
        "kv_events_config": None,
        "enable_trace": False,
        "api_key": None,
        "served_model_name": MODEL_PATH,
        "weight_version": "default",
        "chat_template": None,
        "completion_template": None,
        "file_storage_path": "sglang_storage",
        "enable_cache_report": False,
        "reasoning_parser": None,
        "tool_call_parser": None,
        "dp_size": layout.dp,
        "load_balance_method": "round_robin",
        "dist_init_addr": None,
        "nnodes": 1,
        "node_rank": 0,
        "json_model_override_args": "{}",
        "preferred_sampling_params": None,
        "enable_lora": None,
        "max_lora_rank": None,
        "lora_paths": None,
        "max_loras_per_batch": 8,
        "lora_backend": "triton",
        "attention_backend": "flashinfer",
        "decode_attention_backend": None,
        "prefill_attention_backend": None,
        "sampling_backend": "flashinfer",
        "grammar_backend": "xgrammar",
        "mm_attention_backend": None,
        "speculative_algorithm": None,
        "speculative_draft_model_path": None,
        "speculative_num_steps": None,
        "speculative_eagle_topk": None,
        "speculative_num_draft_tokens": None,
        "ep_size": 1,
        "moe_a2a_backend": "none",
        "moe_runner_backend": "auto",
        "enable_eplb": False,
        "enable_dp_attention": False,
        "enable_dp_lm_head": False,
        **({"attn_cp_size": 1, "moe_dp_size": 1} if profile.new_startup else {}),
        "enable_hierarchical_cache": False,
        "disable_radix_cache": False,
        **graph,
        "disable_cuda_graph_padding": False,
        "enable_profile_cuda_graph": False,
        "enable_cudagraph_gc": False,
        "enable_nccl_nvls": False,
        "enable_symm_mem": False,
        "disable_outlines_disk_cache": False,
        "disable_custom_all_reduce": False,
        "enable_mscclpp": False,
        "disable_overlap_schedule": layout.pp > 1,  # forced on by PP
        "enable_mixed_chunk": False,
        "enable_two_batch_overlap": False,
        "enable_torch_compile": False,
        "torch_compile_max_bs": 32,
        "torchao_config": "",
        "enable_nan_detection": False,
        "enable_p2p_check": False,
        "triton_attention_reduce_in_fp32": False,
        "num_continuous_decode_steps": 1,
        "delete_ckpt_after_loading": False,
        "enable_memory_saver": False,
        "allow_auto_truncate": False,
        "enable_custom_logit_processor": False,
        "flashinfer_mla_disable_ragged": False,
        "disable_shared_experts_fusion": False,
        "disable_chunked_prefix_cache": False,
        "disable_fast_image_processor": False,
        "enable_return_hidden_states": False,
        "warmup_requests": 1,
        "disaggregation_mode": "null",
        "disaggregation_transfer_backend": "mooncake",
        "disaggregation_bootstrap_port": 8998,
    }
    return args


def render_dump(args: dict[str, Any], profile: Profile) -> str:
    """The ``server_args=...`` message: a dict repr (≥0.5.20) or a dataclass repr."""
    if profile.dict_dump:
        return f"server_args={args!r}"
    body = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return f"server_args=ServerArgs({body})"
