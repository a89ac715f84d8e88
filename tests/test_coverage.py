"""Coverage of the installed transformers' vision-language models (``coverage_table`` says
which model types count and why some are not covered).

Every VLM model type's image-processor class must be one ``mmfast.hf`` backs or be listed in
``coverage_table.EXCEPTIONS`` with its reason, and likewise its video-processor class
(``VIDEO_EXCEPTIONS``); mmfast must route each model type to the class transformers routes it
to. A transformers release that adds a model type fails here until it is covered or explained.
The README's coverage table is generated from the same data.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from coverage_table import (
    DEFAULT_REFUSALS,
    EXCEPTIONS,
    README,
    VIDEO_EXCEPTIONS,
    image_classes,
    table,
    video_classes,
    vlm_model_types,
)

import mmfast
from mmfast import hf
from mmfast.errors import UnsupportedModelError
from mmfast.models.config import load_video_config
from mmfast.models.registry import VIDEO_FAMILIES

SUPPORTED = set(hf.supported_classes())
PIL_CLASSES = {
    name
    for classes in importlib.import_module(
        "transformers.models.auto.image_processing_auto"
    ).IMAGE_PROCESSOR_MAPPING_NAMES.values()
    for backend, name in classes.items()
    if backend == "pil"
}
IMAGE_TYPES = [t for t in vlm_model_types() if image_classes(t)]


@pytest.mark.parametrize("model_type", IMAGE_TYPES)
def test_every_vlm_image_class_is_backed_or_explained(model_type: str) -> None:
    classes = set(image_classes(model_type))
    if model_type in EXCEPTIONS:
        assert not classes & SUPPORTED, f"{model_type} is covered now: drop its exception"
    else:
        assert classes & SUPPORTED, f"{model_type}: {sorted(classes)} not backed, not explained"


@pytest.mark.parametrize("model_type", sorted(video_classes()))
def test_every_vlm_video_class_is_covered_or_explained(model_type: str) -> None:
    name = video_classes()[model_type]
    if model_type in VIDEO_EXCEPTIONS:
        assert name not in VIDEO_FAMILIES, f"{model_type} is covered now: drop its exception"
    else:
        assert name in VIDEO_FAMILIES, f"{model_type}: {name} not covered, not explained"


def test_exceptions_name_vlm_model_types() -> None:
    assert set(EXCEPTIONS) | set(DEFAULT_REFUSALS) <= set(IMAGE_TYPES)
    assert set(VIDEO_EXCEPTIONS) <= set(video_classes())


@pytest.mark.parametrize("model_type", IMAGE_TYPES)
def test_a_checkpoint_naming_only_its_model_type_loads(tmp_path: Path, model_type: str) -> None:
    """A checkpoint whose files name no image-processor class (a ``config.json`` holding
    only its model type) gets the class transformers picks, with that class's defaults."""
    classes = image_classes(model_type)
    if not set(classes) & SUPPORTED:
        pytest.skip(f"{model_type}: not covered (see the exceptions)")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    backend = "pil" if set(classes) & set(PIL_CLASSES) else "torchvision"
    preprocessor = tmp_path / "preprocessor_config.json"
    if model_type in DEFAULT_REFUSALS:
        setting = DEFAULT_REFUSALS[model_type][0]
        preprocessor.write_text("{}")
        with pytest.raises(UnsupportedModelError, match=setting):
            mmfast.ImageProcessor.from_pretrained(tmp_path, backend=backend)
        preprocessor.write_text(json.dumps({setting: False}))
    else:
        preprocessor.write_text("{}")
    proc = mmfast.ImageProcessor.from_pretrained(tmp_path, backend=backend)
    assert proc.config.image_processor_type in {name.removesuffix("Pil") for name in classes}


@pytest.mark.parametrize("model_type", sorted(video_classes()))
def test_a_checkpoint_naming_only_its_model_type_loads_its_video_processor(
    tmp_path: Path, model_type: str
) -> None:
    name = video_classes()[model_type]
    if name not in VIDEO_FAMILIES:
        pytest.skip(f"{model_type}: not covered (see the exceptions)")
    (tmp_path / "preprocessor_config.json").write_text("{}")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    assert load_video_config(tmp_path).video_processor_type == name


def test_mmfast_hf_backs_every_covered_video_class() -> None:
    """(transformers names its video classes only where torchvision is installed.)"""
    pytest.importorskip("torchvision")
    covered = {name for t, name in video_classes().items() if t not in VIDEO_EXCEPTIONS}
    assert covered <= SUPPORTED


def test_readme_shows_the_coverage() -> None:
    assert table() in README.read_text(encoding="utf-8"), (
        "the README's coverage table is stale: run python tests/coverage_table.py"
    )
