"""Writes ``torchvision.json``: transformers' torchvision classes on every case of
``tests/torchvision_cases.py``, as digests, for ``test_torchvision`` to check without torch.

Run from the repository root in an environment with torch 2.14, torchvision 0.29 and
transformers 5.24 (x86 with AVX2 or AVX-512) and the ``../shared`` folder:

    python tests/goldens/make_torchvision_goldens.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torchvision_cases import (
    GOLDENS,
    HF_REFUSALS,
    SHARED,
    VIDEO_CASES,
    cases,
    digest,
    hf_torchvision,
    hf_video,
    input_digest,
    load_image,
)


def main() -> None:
    torch.set_num_threads(1)
    goldens = {}
    for case in cases():
        images = [load_image(name) for name in case.images]
        if any(image is None for image in images):
            sys.exit(f"{SHARED / 'images'} is needed for {case.id}")
        entry: dict[str, object] = {"input": input_digest(images)}
        try:
            outputs, bfloat16 = hf_torchvision(case)
        except Exception as exc:  # any refusal is recorded as one
            entry["error"] = type(exc).__name__
        else:
            entry["bfloat16"] = bfloat16
            entry["outputs"] = digest(outputs, bfloat16)
        goldens[case.id] = entry
    videos: dict[str, object] = {}
    for video in VIDEO_CASES:
        try:
            videos[video.id] = digest(hf_video(video), bfloat16=False)
        except HF_REFUSALS as exc:
            videos[video.id] = {"error": type(exc).__name__}
    versions = {"torch": torch.__version__, "transformers": __import__("transformers").__version__}
    # One case a line: small diffs when a case changes.
    lines = [
        f"{json.dumps(name)}: {json.dumps(entry)}"
        for table in (goldens, videos)
        for name, entry in table.items()
    ]
    split = len(goldens)
    GOLDENS.write_text(
        f'{{"versions": {json.dumps(versions)},\n"cases": {{\n'
        + ",\n".join(lines[:split])
        + '\n},\n"videos": {\n'
        + ",\n".join(lines[split:])
        + "\n}}\n"
    )
    json.loads(GOLDENS.read_text())
    size = GOLDENS.stat().st_size // 1024
    print(f"{len(goldens)} cases, {len(videos)} videos -> {GOLDENS} ({size} KiB)")


if __name__ == "__main__":
    main()
