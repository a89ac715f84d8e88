"""Which of the installed transformers' vision-language models mmfast computes, and why not
where it does not.

A model type is a vision-language model (VLM) here when transformers maps it to a model that
takes images and text: ``MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES`` or
``MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES``. Its image classes come from AutoImageProcessor's
``IMAGE_PROCESSOR_MAPPING_NAMES``, its video class from AutoVideoProcessor's
``VIDEO_PROCESSOR_MAPPING_NAMES`` (read from transformers' source, since transformers blanks
the names when torchvision is absent). The mappings are read without torch.

``python tests/coverage_table.py`` rewrites the README's coverage table from this data.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from functools import cache
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN = "<!-- coverage table: python tests/coverage_table.py -->"
END = "<!-- end of coverage table -->"

# Image classes mmfast does not compute, by model type, with the reason.
_PER_IMAGE_STATISTICS = (
    "normalises each image by its own mean and standard deviation (float32 reductions over "
    "its pixels), then resizes the float image with torch's antialiased bilinear kernel: "
    "neither is a per-value table over uint8 pixels, and the reductions' float order is "
    "torch's"
)
_NEMOTRON = (
    "resizes the float32 image with torch's antialiased bicubic kernel and normalises the "
    "unrounded values (on purpose, to keep the overshoot): the core has no antialiased "
    "float resize"
)
EXCEPTIONS: dict[str, str] = {
    "kosmos-2.5": _PER_IMAGE_STATISTICS,
    "nemotron_h_omni": _NEMOTRON,
    "pix2struct": _PER_IMAGE_STATISTICS,
}

# Video classes mmfast does not compute, by model type, with the reason.
VIDEO_EXCEPTIONS: dict[str, str] = {
    "nemotron_h_omni": _NEMOTRON,
}

# Covered classes whose defaults ask for what mmfast does not compute: a checkpoint with the
# class's defaults is refused with UnsupportedModelError naming the setting (mmfast.hf runs
# transformers' code for it); with the setting off, mmfast computes it.
DEFAULT_REFUSALS: dict[str, tuple[str, str]] = {
    "pp_formulanet": ("do_crop_margin", "a crop found from the pixels"),
    "udop": ("apply_ocr", "Tesseract's words and boxes"),
}


def _auto(name: str) -> Any:
    return importlib.import_module(f"transformers.models.auto.{name}")


def _literal_mapping(module: str, variable: str) -> dict[str, Any]:
    """The ``OrderedDict([...])`` literal assigned to ``variable`` in ``module``'s source."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == variable for target in node.targets
        ):
            assert isinstance(node.value, ast.Call), variable
            return dict(ast.literal_eval(node.value.args[0]))
    raise LookupError(f"{variable} not found in {module}")


@cache
def vlm_model_types() -> list[str]:
    """The model types transformers maps to a model taking images and text, and to an image
    or a video processor."""
    modeling = _auto("modeling_auto")
    vlm = set(modeling.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES) | set(
        modeling.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES
    )
    processed = set(_auto("image_processing_auto").IMAGE_PROCESSOR_MAPPING_NAMES) | set(
        video_classes_all()
    )
    return sorted(vlm & processed)


def image_classes(model_type: str) -> list[str]:
    """The image-processor class names AutoImageProcessor picks for ``model_type``, one per
    backend."""
    names = _auto("image_processing_auto").IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type) or {}
    return sorted({name for name in names.values() if name})


@cache
def video_classes_all() -> dict[str, str]:
    """Every model type AutoVideoProcessor maps, to its class name."""
    names = _literal_mapping(
        "transformers.models.auto.auto_mappings", "VIDEO_PROCESSOR_MAPPING_NAMES"
    )
    names.update(
        _literal_mapping(
            "transformers.models.auto.video_processing_auto",
            "MISSING_VIDEO_PROCESSOR_MAPPING_NAMES",
        )
    )
    return {model_type: entry["torchvision"] for model_type, entry in names.items()}


def video_classes() -> dict[str, str]:
    """The VLM model types AutoVideoProcessor maps, to their class name."""
    vlm = set(vlm_model_types())
    return {k: v for k, v in video_classes_all().items() if k in vlm}


def _cell(
    model_type: str,
    classes: list[str],
    supported: set[str],
    reasons: dict[str, str],
    notes: list[str],
) -> tuple[str, str]:
    """A class's two cells; a reason not served goes to ``notes`` once and is cited by
    number."""
    if not classes:
        return "-", ""
    name = f"`{classes[0].removesuffix('Pil')}`"
    if set(classes) & supported:
        if model_type in DEFAULT_REFUSALS:
            setting, what = DEFAULT_REFUSALS[model_type]
            return name, f"yes, with `{setting}` off ({what})"
        return name, "yes"
    if model_type not in reasons:
        return name, "**not covered**"
    if reasons[model_type] not in notes:
        notes.append(reasons[model_type])
    return name, f"no ({notes.index(reasons[model_type]) + 1})"


def table() -> str:
    """The README's coverage table: one row per VLM model type, then the reasons of the
    classes not served."""
    from mmfast import hf
    from mmfast.models.registry import VIDEO_FAMILIES

    supported = set(hf.supported_classes()) | set(VIDEO_FAMILIES)
    videos = video_classes()
    rows = [
        "| model type | image processor | mmfast | video processor | mmfast |",
        "|---|---|---|---|---|",
    ]
    counts = [0, 0]
    notes: list[str] = []
    for model_type in vlm_model_types():
        image = _cell(model_type, image_classes(model_type), supported, EXCEPTIONS, notes)
        video_names = [videos[model_type]] if model_type in videos else []
        video = _cell(model_type, video_names, supported, VIDEO_EXCEPTIONS, notes)
        counts[0] += image[1].startswith("yes")
        counts[1] += video[1].startswith("yes")
        rows.append(f"| {model_type} | {image[0]} | {image[1]} | {video[0]} | {video[1]} |")
    images = sum(bool(image_classes(t)) for t in vlm_model_types())
    summary = (
        f"{counts[0]} of the {images} VLM model types with an image processor and "
        f"{counts[1]} of the {len(videos)} with a video processor run on mmfast "
        f"(transformers {_version()})."
    )
    reasons = [f"{i}. Not served: {note}." for i, note in enumerate(notes, 1)]
    return "\n".join([BEGIN, summary, "", *rows, "", *reasons, END])


def _version() -> str:
    return str(importlib.import_module("transformers").__version__)


def main() -> None:
    text = README.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{README} has no coverage table markers ({BEGIN})")
    README.write_text(pattern.sub(lambda _: table(), text), encoding="utf-8")


if __name__ == "__main__":
    main()
