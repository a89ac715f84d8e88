"""Per-request time of vLLM's and SGLang's own multimodal request code, transformers vs mmfast.

Run it with the Python of an environment that has vLLM or SGLang and mmfast installed (see
README, "Use it in your server"), offline:

    python benches/servers.py vllm [--repeat 5] [--sizes 640x480 1411x1411 3840x2160 4000x3000]
    python benches/servers.py sglang [...]

For each model it builds the server's request objects twice, as ``tests/test_servers.py`` does:
once as the server loads them, once after ``mmfast.hf.install()`` (two checkpoint directories,
so that the server's processor caches keep one of each), then times one request at a time,
alternating the two, each on a new image (the servers cache processed images by content).
The first request of each size is not counted (the first large call of a process pays for
fresh memory); the figures are the medians of the others: wall time, and the CPU time of the
process (every thread: what the request costs a loaded machine). vLLM: ``render_cmpl`` with a
PIL image (its ``LLM.generate`` input). SGLang: ``process_mm_data_async`` with the JPEG bytes of a
request (decoding included, the same for both). Each request's tensors are compared bit for
bit between the two.

vLLM runs its multimodal processing with torch set to one thread (``OMP_NUM_THREADS`` if set);
SGLang's tokenizer process leaves torch at its default. mmfast uses ``MMFAST_NUM_THREADS``, else
every core: run once as is and once with ``MMFAST_NUM_THREADS=1`` to see both.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import test_servers as servers
from conftest import same_bits, smooth
from test_hf import as_array

from mmfast import hf

SIZES = ["640x480", "1411x1411", "3840x2160", "4000x3000"]


def images(width: int, height: int, count: int) -> list[Image.Image]:
    """``count`` different photographic-like images (one pattern, shifted)."""
    base = smooth(height, width, 0)
    return [Image.fromarray(np.roll(base, 7 * i, axis=1)) for i in range(count)]


def tensors(value: Any) -> list[Any]:
    """Every tensor or array in a nested output, in order."""
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors(item)]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors(item)]
    return [value] if hasattr(value, "dtype") and hasattr(value, "shape") else []


def assert_equal(got: Any, want: Any) -> None:
    pairs = list(zip(tensors(got), tensors(want), strict=True))
    assert pairs, "no tensors"
    for a, b in pairs:
        assert same_bits(as_array(a), as_array(b)), "mmfast's tensors differ from transformers'"


def timed(function: Callable[[], Any]) -> tuple[tuple[float, float], Any]:
    """``function()``'s wall time and this process's CPU time (every thread), in ms."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = function()
    return ((time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3), out


def measure(
    name: str,
    request_plain: Callable[[Image.Image], Any],
    request_mmfast: Callable[[Image.Image], Any],
    sizes: list[str],
    repeat: int,
) -> None:
    for size in sizes:
        width, height = map(int, size.split("x"))
        plain_ms, mmfast_ms = [], []
        for i, image in enumerate(images(width, height, repeat + 1)):
            # Alternate which side goes first.
            if i % 2:
                b, got = timed(lambda image=image: request_mmfast(image))
                a, want = timed(lambda image=image: request_plain(image))
            else:
                a, want = timed(lambda image=image: request_plain(image))
                b, got = timed(lambda image=image: request_mmfast(image))
            assert_equal(got, want)
            if i:
                plain_ms.append(a)
                mmfast_ms.append(b)
        columns = []
        for k in (0, 1):  # wall, CPU
            a = statistics.median(t[k] for t in plain_ms)
            b = statistics.median(t[k] for t in mmfast_ms)
            columns.append(f"{a:>9.1f} {b:>8.1f} {a / b:>6.2f}x")
        print(f"{name:<22} {size:>10} {'   '.join(columns)}", flush=True)


def bench_vllm(root: Path, sizes: list[str], repeat: int, only: list[str] | None) -> None:
    cases = [
        ("Qwen2-VL uint8", servers.QWEN2, {}),
        ("Qwen2-VL float", servers.QWEN2, {"mm_device_do_normalize": False}),
        ("Qwen2.5-VL uint8", servers.QWEN25, {}),
        ("Qwen3-VL uint8", servers.QWEN3, {}),
        ("LLaVA-OneVision", servers.ONEVISION, {}),
        ("InternVL3-hf", servers.INTERNVL, {}),
        ("Llama-4", servers.LLAMA4, {}),
    ]
    for name, model, options in cases:
        if only and name not in only:
            continue
        renderers = []
        for side in ("transformers", "mmfast"):
            if side == "mmfast":
                hf.install()
            directory = root / f"{name}-{side}".replace(" ", "_")
            directory.mkdir()
            renderer = servers.vllm_renderer(
                servers.write_server_checkpoint(directory, model), **options
            )
            # vLLM loads the HF processor on the first request: load it now, in this state.
            renderer.get_mm_processor().info.get_hf_processor()
            renderers.append(renderer)
        hf.uninstall()

        def request(renderer: Any, model: Any = model) -> Callable[[Image.Image], Any]:
            return lambda image: servers.engine_input(
                renderer.render_cmpl(
                    [{"prompt": model.prompt, "multi_modal_data": {"image": image}}]
                )[0]
            )["mm_kwargs"]

        measure(name, request(renderers[0]), request(renderers[1]), sizes, repeat)
    print(f"mmfast.hf.stats(): {hf.stats()}; load average {os.getloadavg()[0]:.1f}")


def bench_sglang(
    root: Path, sizes: list[str], repeat: int, backends: list[str], only: list[str] | None
) -> None:
    import asyncio

    from sglang.srt.managers.io_struct import GenerateReqInput
    from sglang.srt.multimodal.processors import base_processor

    # As under SGLang's CPU engine (SGLANG_USE_CPU_ENGINE=1): calls pass device="cpu".
    base_processor._is_cpu = True
    cases = [
        ("Qwen2-VL", servers.QWEN2),
        ("Qwen2.5-VL", servers.QWEN25),
        ("Qwen3-VL", servers.QWEN3),
        ("Llama-4", servers.LLAMA4),
        ("LLaVA-1.5", servers.LLAVA),
    ]
    for backend in backends:
        for name, model in cases:
            if only and name not in only:
                continue
            managers = []
            for side in ("transformers", "mmfast"):
                if side == "mmfast":
                    hf.install()
                directory = root / f"{name}-{backend}-{side}"
                directory.mkdir()
                managers.append(
                    servers.sglang_manager(
                        servers.write_server_checkpoint(directory, model), backend
                    )
                )
            hf.uninstall()

            def request(manager: Any, model: Any = model) -> Callable[[Image.Image], Any]:
                def run(image: Image.Image) -> Any:
                    obj = GenerateReqInput(text=model.prompt, image_data=[servers.jpeg(image)])
                    obj.normalize_batch_and_arguments()
                    out = manager.mm_processor.process_mm_data_async(
                        image_data=obj.image_data,
                        input_text=obj.text,
                        request_obj=obj,
                        max_req_input_len=10_000_000,
                    )
                    return [item.feature for item in asyncio.run(out).mm_items]

                return run

            label = f"{name} {backend}"
            measure(label, request(managers[0]), request(managers[1]), sizes, repeat)
    print(f"mmfast.hf.stats(): {hf.stats()}; load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server", choices=["vllm", "sglang"])
    parser.add_argument("--sizes", nargs="+", default=SIZES, help="WxH")
    parser.add_argument("--repeat", type=int, default=5, help="timed requests per size")
    parser.add_argument("--backends", nargs="+", default=["auto", "pil"], help="SGLang only")
    parser.add_argument("--only", nargs="+", help="cases to run, by name (default: all)")
    args = parser.parse_args()
    import warnings

    warnings.simplefilter("ignore")
    import torch

    import mmfast

    package = __import__(args.server)
    import transformers

    print(
        f"{args.server} {package.__version__}, transformers {transformers.__version__}, "
        f"torch {torch.__version__}, mmfast {mmfast.__version__}; {platform.machine()}, "
        f"{os.cpu_count()} logical CPUs; MMFAST_NUM_THREADS="
        f"{os.environ.get('MMFAST_NUM_THREADS', 'unset')}, OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, torch threads "
        f"{torch.get_num_threads()} (vLLM sets its processing to OMP_NUM_THREADS, else 1)"
    )
    print(f"load average {os.getloadavg()[0]:.1f}; medians in ms, wall time then CPU time")
    header = f"{'HF':>9} {'mmfast':>8} {'ratio':>7}"
    print(f"{'case':<22} {'size':>10} {header}   {header}")
    with tempfile.TemporaryDirectory() as root:
        if args.server == "vllm":
            bench_vllm(Path(root), args.sizes, args.repeat, args.only)
        else:
            bench_sglang(Path(root), args.sizes, args.repeat, args.backends, args.only)


if __name__ == "__main__":
    main()
