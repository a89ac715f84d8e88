"""mmfast.hf inside vLLM's and SGLang's own request code, offline, bit for bit.

Neither server can start here (vLLM's PyPI wheel has no CPU kernels; SGLang's kernels need
libcuda), so these tests build the objects their API-server / tokenizer process builds and
call them per request, on checkpoint directories written in tmp_path (no weights: config.json
with the model type, architecture and token ids the processing code reads,
preprocessor_config.json, processor_config.json and a WordLevel tokenizer, see
:func:`test_hf.write_checkpoint`). Each case runs the server's code twice in one process:
as it is, then after ``mmfast.hf.install()`` with the server's processor caches cleared.
Token ids and every tensor must be equal bit for bit, and ``mmfast.hf.stats()`` must count
every image-processor call as computed by mmfast (no fallback).

- vLLM (``vllm`` importable): ``renderer_from_config(VllmConfig)``, the renderer the API
  server builds, then ``render_cmpl`` (a prompt with ``multi_modal_data``) and ``render_chat``
  (OpenAI messages with a data-URL image), which run vLLM's ``cached_get_processor`` and its
  model's multimodal processor. Qwen2-VL, Qwen2.5-VL and Qwen3-VL run by default with
  ``mm_device_do_normalize`` (the image processor called with ``do_rescale=False,
  do_normalize=False``: uint8 pixels) and once without it.
- SGLang (``sglang`` importable): ``TokenizerManager.init_model_config`` and
  ``init_tokenizer_and_processor`` (SGLang's ``get_processor`` and ``get_mm_processor``), then
  ``process_mm_data_async`` per request, with ``--image-processor-backend`` auto (with the CPU
  engine's ``device="cpu"``, and without a device) and pil; LLaVA's processor calls the image
  processor without ``return_tensors``, in a forked process pool that the tests replace with a
  thread pool so that this process's ``stats()`` counts the calls. A GPU server's
  ``device="cuda:N"`` with nvJPEG-decoded CUDA tensors cannot run here: a stand-in tensor checks
  that mmfast.hf copies such images to the CPU (:func:`test_image_tensors_off_the_cpu`).

vLLM and SGLang pin different transformers versions and are not in the project's test extra:
each runs in its own environment with mmfast installed (README, "Use it in your server"); where
one is missing its tests skip.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from test_hf import SPECIAL_TOKENS, WORDS, assert_same, pil, write_checkpoint

from mmfast import hf

pytest.importorskip("transformers")

# Token ids of the tokenizer write_checkpoint makes, for the config fields servers read.
VOCAB = {token: i for i, token in enumerate(SPECIAL_TOKENS + WORDS)}
QWEN_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
QWEN_TOKENS = {
    "image_token_id": VOCAB["<|image_pad|>"],
    "video_token_id": VOCAB["<|video_pad|>"],
    "vision_start_token_id": VOCAB["<|vision_start|>"],
    "vision_end_token_id": VOCAB["<|vision_end|>"],
}
INTERNVL_TOKENS = {
    "start_image_token": "<img>",
    "end_image_token": "</img>",
    "context_image_token": "<IMG_CONTEXT>",
    "video_token": "<video>",
}


@dataclass(frozen=True)
class Model:
    """A built-in model as a server loads it: the config.json fields its processing code reads
    beyond the model type (architecture, token ids), the placeholder a prompt holds for one
    image, and the tokenizer attributes its processor reads."""

    model_id: str
    config: Mapping[str, Any]
    placeholder: str
    tokens: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.model_id.split("/")[-1]

    @property
    def prompt(self) -> str:
        return f"{self.placeholder} describe this image"


QWEN2 = Model(
    "Qwen/Qwen2-VL-7B-Instruct",
    {"architectures": ["Qwen2VLForConditionalGeneration"], **QWEN_TOKENS},
    QWEN_PLACEHOLDER,
)
QWEN25 = Model(
    "Qwen/Qwen2.5-VL-7B-Instruct",
    {"architectures": ["Qwen2_5_VLForConditionalGeneration"], **QWEN_TOKENS},
    QWEN_PLACEHOLDER,
)
QWEN3 = Model(
    "Qwen/Qwen3-VL-8B-Instruct",
    {"architectures": ["Qwen3VLForConditionalGeneration"], **QWEN_TOKENS},
    QWEN_PLACEHOLDER,
)
ONEVISION = Model(
    "llava-hf/llava-onevision-qwen2-7b-ov-hf",
    {
        "architectures": ["LlavaOnevisionForConditionalGeneration"],
        "image_token_index": VOCAB["<image>"],
        "video_token_index": VOCAB["<video>"],
    },
    "<image>",
)
INTERNVL = Model(
    "OpenGVLab/InternVL3-8B-hf",
    {
        "architectures": ["InternVLForConditionalGeneration"],
        "image_token_id": VOCAB["<IMG_CONTEXT>"],
    },
    "<IMG_CONTEXT>",
    INTERNVL_TOKENS,
)
LLAMA4 = Model(
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    {"architectures": ["Llama4ForConditionalGeneration"]},
    "<|image|>",
)


def write_server_checkpoint(directory: Path, model: Model) -> Path:
    """:func:`test_hf.write_checkpoint` with the config fields ``model`` names and a chat
    template that puts its placeholder where a message has an image (OpenAI content parts)."""
    from mmfast.models import registry

    write_checkpoint(directory, model.model_id, model.tokens)
    config = {"model_type": registry.BUILTINS[model.model_id].model_type, **model.config}
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    template = (
        "{% for message in messages %}{% for part in message['content'] %}"
        f"{{% if part['type'] == 'image' %}}{model.placeholder}"
        "{% elif part['type'] == 'text' %} {{ part['text'] }}{% endif %}"
        "{% endfor %}{% endfor %}"
    )
    tokenizer_config = directory / "tokenizer_config.json"
    settings = json.loads(tokenizer_config.read_text(encoding="utf-8"))
    tokenizer_config.write_text(json.dumps({**settings, "chat_template": template}), "utf-8")
    return directory


def data_url(image: Image.Image) -> str:
    """``image`` as a PNG data URL, as an OpenAI-style request carries it."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fresh mmfast.hf.stats() counts, and transformers' loading untouched before and after."""
    monkeypatch.setattr(hf, "_calls", Counter())
    hf.uninstall()
    yield
    hf.uninstall()


def run_twice(run: Callable[[], Any], clear_caches: Callable[[], None]) -> tuple[Any, Any]:
    """``run()`` as the server runs it, then with mmfast installed (the server's processor
    caches cleared before and after, so that it loads its processors again)."""
    clear_caches()
    want = run()
    assert hf.stats()["mmfast"] == 0
    hf.install()
    clear_caches()
    try:
        got = run()
    finally:
        hf.uninstall()
        clear_caches()
    return got, want


def assert_all_computed_by_mmfast(calls: int) -> None:
    """``calls`` image-processor calls (at least one), every one computed by mmfast."""
    stats = hf.stats()
    assert stats["transformers"] == 0, stats
    assert stats["mmfast"] == calls > 0, stats


def quiet_import(name: str) -> Any:
    """``pytest.importorskip(name)``, ignoring the warnings the server's import emits about
    this machine (no CUDA, kernels missing): they are not the behaviour under test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pytest.importorskip(name)


# --------------------------------------------------------------------------------------------
# vLLM


def vllm_renderer(directory: Path, **model_options: Any) -> Any:
    """The renderer vLLM's API server builds for the model in ``directory``; vLLM's device
    auto-detection finds no GPU here, so the device is named."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from vllm.config import DeviceConfig, ModelConfig, VllmConfig
        from vllm.renderers.registry import renderer_from_config

        model_config = ModelConfig(model=str(directory), tokenizer=str(directory), **model_options)
        config = VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"))
        return renderer_from_config(config)


def clear_vllm_caches() -> None:
    from vllm.transformers_utils import processor

    processor.cached_get_processor.cache_clear()


def engine_input(value: Mapping[str, Any]) -> dict[str, Any]:
    """A renderer's engine input, with each multimodal item as its tensors (and without the
    arrival time)."""
    data = {key: item for key, item in value.items() if key not in ("arrival_time", "mm_kwargs")}
    data["mm_kwargs"] = {
        modality: [item.get_data() for item in items]
        for modality, items in value["mm_kwargs"].items()
    }
    return data


def vllm_requests(model: Model, directory: Path, **model_options: Any) -> dict[str, Any]:
    """A completion request (one image in ``multi_modal_data``) and a chat request (two
    data-URL images in one message) through a new renderer; the engine inputs of both."""
    from vllm.renderers.params import ChatParams

    renderer = vllm_renderer(directory, **model_options)
    completion = renderer.render_cmpl(
        [{"prompt": model.prompt, "multi_modal_data": {"image": pil(333, 250, 1)}}]
    )
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": data_url(pil(120, 200, 2))}},
                {"type": "image_url", "image_url": {"url": data_url(pil(241, 97, 3))}},
                {"type": "text", "text": "describe this image"},
            ],
        }
    ]
    _, chat = renderer.render_chat([messages], ChatParams())
    return {
        "completion": [engine_input(value) for value in completion],
        "chat": [engine_input(value) for value in chat],
    }


# The model, its ModelConfig options, and the image-processor calls of the two requests: vLLM
# calls the HF processor once per request, its InternVL processor once per image (three).
VLLM_CASES = [
    pytest.param(QWEN2, {}, 2, id="Qwen2-VL uint8"),
    pytest.param(QWEN2, {"mm_device_do_normalize": False}, 2, id="Qwen2-VL"),
    pytest.param(QWEN25, {}, 2, id="Qwen2.5-VL uint8"),
    pytest.param(QWEN25, {"mm_device_do_normalize": False}, 2, id="Qwen2.5-VL"),
    pytest.param(QWEN3, {}, 2, id="Qwen3-VL uint8"),
    pytest.param(QWEN3, {"mm_device_do_normalize": False}, 2, id="Qwen3-VL"),
    pytest.param(ONEVISION, {}, 2, id="LLaVA-OneVision"),
    pytest.param(INTERNVL, {}, 3, id="InternVL3-hf"),
    pytest.param(LLAMA4, {}, 2, id="Llama-4"),
]


@pytest.mark.parametrize(("model", "options", "calls"), VLLM_CASES)
def test_vllm_renderer(
    model: Model, options: dict[str, Any], calls: int, tmp_path: Path, counted: None
) -> None:
    """vLLM's renderer with mmfast installed: the same token ids, placeholders, hashes and
    tensors as without, for completion and chat requests, every image-processor call computed
    by mmfast (Qwen's uint8 path included)."""
    quiet_import("vllm")
    directory = write_server_checkpoint(tmp_path, model)
    got, want = run_twice(lambda: vllm_requests(model, directory, **options), clear_vllm_caches)
    assert_same(got, want)
    assert_all_computed_by_mmfast(calls)
    for request in (*want["completion"], *want["chat"]):
        placeholders = request["mm_placeholders"]["image"]
        assert placeholders and all(p.length > 0 for p in placeholders)
    uint8 = model in (QWEN2, QWEN25, QWEN3) and "mm_device_do_normalize" not in options
    pixels = want["completion"][0]["mm_kwargs"]["image"][0]["pixel_values"]
    assert (str(pixels.dtype) == "torch.uint8") == uint8


@pytest.mark.parametrize("size", [{"shortest_edge": 3136, "longest_edge": 200704}])
def test_vllm_request_kwargs(size: dict[str, int], tmp_path: Path, counted: None) -> None:
    """A request's ``mm_processor_kwargs`` reach the image processor as call settings that
    mmfast reads (Qwen2-VL's ``size`` bounds here)."""
    quiet_import("vllm")
    directory = write_server_checkpoint(tmp_path, QWEN2)

    def request() -> list[dict[str, Any]]:
        renderer = vllm_renderer(directory)
        prompt = {
            "prompt": QWEN2.prompt,
            "multi_modal_data": {"image": pil(700, 900, 1)},
            "mm_processor_kwargs": {"size": size},
        }
        return [engine_input(value) for value in renderer.render_cmpl([prompt])]

    got, want = run_twice(request, clear_vllm_caches)
    assert_same(got, want)
    assert_all_computed_by_mmfast(1)
    # The bounds applied: 700x900 is over 200704 pixels, so it was scaled down.
    assert want[0]["mm_kwargs"]["image"][0]["pixel_values"].shape[0] * 14 * 14 <= 200704


# --------------------------------------------------------------------------------------------
# SGLang

LLAVA = Model(
    "llava-hf/llava-1.5-7b-hf",
    {"architectures": ["LlavaForConditionalGeneration"], "image_token_index": VOCAB["<image>"]},
    "<image>",
)


def jpeg(image: Image.Image) -> bytes:
    """``image`` as the JPEG bytes of a request."""
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def sglang_manager(directory: Path, backend: str) -> Any:
    """SGLang's TokenizerManager for the model in ``directory``, with what its ``__init__``
    runs to load the model config, the HF processor (``get_processor``) and the multimodal
    processor (``get_mm_processor``), after publishing the server arguments as the launcher
    does for the tokenizer process; nothing else (no sockets, no scheduler)."""
    from concurrent.futures import ThreadPoolExecutor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sglang.srt.managers.tokenizer_manager import TokenizerManager
        from sglang.srt.runtime_context import publish
        from sglang.srt.server_args import ServerArgs

        server_args = ServerArgs(
            model_path=str(directory),
            device="cpu",
            image_processor_backend=backend,
            enable_multimodal=True,
        )
        publish(server_args, role="tokenizer")
        manager = TokenizerManager.__new__(TokenizerManager)
        manager.server_args = server_args
        manager.init_model_config()
        manager.init_tokenizer_and_processor()
    # LLaVA's processor preprocesses in a forked process pool; a thread pool keeps its calls in
    # this process, where stats() counts them.
    processor = getattr(manager.mm_processor, "inner", manager.mm_processor)
    processor.cpu_executor.shutdown()
    processor.cpu_executor = ThreadPoolExecutor(1)
    return manager


def struct(value: Any) -> Any:
    """An SGLang msgspec struct (and the structs in it) as dicts, for :func:`assert_same`."""
    import msgspec

    if isinstance(value, msgspec.Struct):
        return {key: struct(item) for key, item in msgspec.structs.asdict(value).items()}
    if isinstance(value, list):
        return [struct(item) for item in value]
    if isinstance(value, dict):
        return {key: struct(item) for key, item in value.items()}
    return value


def sglang_requests(
    directory: Path, backend: str, requests: list[tuple[str, list[bytes], list[str] | None]]
) -> list[Any]:
    """``process_mm_data_async`` for each (prompt, images, modalities), as the TokenizerManager
    runs it for a request, through a new manager; the outputs as dicts."""
    from sglang.srt.managers.io_struct import GenerateReqInput

    manager = sglang_manager(directory, backend)
    outputs = []
    for prompt, images, modalities in requests:
        request = GenerateReqInput(text=prompt, image_data=images, modalities=modalities)
        request.normalize_batch_and_arguments()
        output = asyncio.run(
            manager.mm_processor.process_mm_data_async(
                image_data=request.image_data,
                input_text=request.text,
                request_obj=request,
                max_req_input_len=100_000,
            )
        )
        outputs.append(struct(output))
    return outputs


# The model, the image processor backend, whether the CPU engine runs (SGLANG_USE_CPU_ENGINE=1:
# device="cpu" on each call; otherwise this machine, not CUDA-like, passes no device), and the
# image-processor calls of the requests below (one per request; LLaVA's, one per image).
SGLANG_CASES = [
    pytest.param(QWEN2, "auto", True, 1, id="Qwen2-VL auto cpu"),
    pytest.param(QWEN2, "auto", False, 1, id="Qwen2-VL auto"),
    pytest.param(QWEN2, "pil", True, 1, id="Qwen2-VL pil"),
    pytest.param(QWEN25, "auto", True, 1, id="Qwen2.5-VL auto cpu"),
    pytest.param(QWEN25, "pil", True, 1, id="Qwen2.5-VL pil"),
    pytest.param(QWEN3, "auto", True, 1, id="Qwen3-VL auto cpu"),
    pytest.param(QWEN3, "pil", True, 1, id="Qwen3-VL pil"),
    pytest.param(LLAMA4, "auto", True, 1, id="Llama-4 auto cpu"),
    pytest.param(LLAMA4, "auto", False, 1, id="Llama-4 auto"),
    pytest.param(LLAVA, "auto", True, 3, id="LLaVA-1.5 auto cpu"),
    pytest.param(LLAVA, "pil", True, 3, id="LLaVA-1.5 pil"),
]


@pytest.mark.parametrize(("model", "backend", "cpu_engine", "calls"), SGLANG_CASES)
def test_sglang_mm_processor(
    model: Model,
    backend: str,
    cpu_engine: bool,
    calls: int,
    tmp_path: Path,
    counted: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SGLang's multimodal processor with mmfast installed: the same input ids, tensors and
    hashes as without, every image-processor call computed by mmfast, with the device and
    return_tensors SGLang passes (device="cpu" under the CPU engine, LLaVA's calls without
    return_tensors)."""
    quiet_import("sglang")
    base_processor = quiet_import("sglang.srt.multimodal.processors.base_processor")
    monkeypatch.setattr(base_processor, "_is_cpu", cpu_engine)
    seen: list[dict[str, Any]] = []
    run = hf._run

    def recording(processor: Any, images: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        seen.append(kwargs)
        return run(processor, images, args, kwargs)

    monkeypatch.setattr(hf, "_run", recording)
    directory = write_server_checkpoint(tmp_path, model)
    two = [jpeg(pil(333, 250, 1)), jpeg(pil(120, 200, 2))]
    requests = [(f"{model.placeholder}{model.placeholder} describe this image", two, None)]
    if model is LLAVA:  # one image per request, unless it says multi-images (then padded)
        requests.append((requests[0][0], two, ["multi-images"]))
    got, want = run_twice(lambda: sglang_requests(directory, backend, requests), lambda: None)
    assert_same(got, want)
    assert_all_computed_by_mmfast(calls)
    # SGLang's own LLaVA code calls the image processor with neither device nor return_tensors.
    llava = model is LLAVA
    devices = {str(kwargs.get("device")) for kwargs in seen}
    assert devices == ({"cpu"} if cpu_engine and backend == "auto" and not llava else {"None"})
    assert {kwargs.get("return_tensors") for kwargs in seen} == {None if llava else "pt"}


class OnGpu:
    """Stands in for a CUDA tensor, which this machine cannot make: SGLang on a GPU server
    decodes JPEGs with nvJPEG into CUDA uint8 (3, H, W) tensors and passes device="cuda:N".
    Like a CUDA tensor, it has a device other than the CPU and gives its values only through
    ``.cpu()``."""

    def __init__(self, tensor: Any) -> None:
        import torch

        self.tensor = tensor
        self.device = torch.device("cuda:0")

    def cpu(self) -> Any:
        return self.tensor

    def numpy(self) -> Any:
        raise TypeError("can't convert cuda:0 device type tensor to numpy")


def test_image_tensors_off_the_cpu(
    tmp_path: Path, counted: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Image tensors on a GPU with a device named (the CPU here; a GPU one under
    MMFAST_HF_CUDA=cpu) are copied to the CPU and computed by mmfast, with transformers'
    values; without a device transformers computes where they are, so the call falls back
    ("device"). Before, such a call failed inside mmfast and logged a warning on every call."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    from conftest import noise

    chw = torch.from_numpy(noise(90, 130, 4).transpose(2, 0, 1).copy())
    plain = transformers_auto().from_pretrained(write_server_checkpoint(tmp_path, QWEN2))
    want = plain([chw], return_tensors="pt", device="cpu")
    backed = hf.wrap(transformers_auto().from_pretrained(tmp_path))
    prepare = backed._prepare_image_like_inputs
    # The patch stands in for a GPU, not for a user's method: not a reason to fall back.
    monkeypatch.setattr(hf, "_replaced", lambda processor: None)
    monkeypatch.setattr(
        backed,
        "_prepare_image_like_inputs",
        lambda *args, **kwargs: [OnGpu(image) for image in prepare(*args, **kwargs)],
    )
    assert_same(dict(backed([chw], return_tensors="pt", device="cpu")), dict(want))
    assert_all_computed_by_mmfast(1)
    with pytest.raises(hf._Fallback, match="cuda:0") as info:
        hf._inputs(backed, [chw], {"return_tensors": "pt"}, None)
    assert info.value.kind == "device"


def transformers_auto() -> Any:
    import transformers

    return transformers.AutoImageProcessor
