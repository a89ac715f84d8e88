"""Peak memory of reading sampled frames from clips of growing length.

For each clip length (10 s, 60 s and 240 s of 640x360 H.264 at 30 frames a second, made with
PyAV by ``mmfast.bench.bench_clip`` and cached in the temp directory) and each reader --
``mmfast.load_video(path, num_frames=16)`` and
``transformers.video_utils.load_video(path, backend="pyav", num_frames=16)`` -- a fresh
subprocess imports the reader, reads its RSS high-water mark (Linux's ``VmHWM``; elsewhere
``resource.getrusage``'s ``ru_maxrss``), reads the clip, and reads the high-water mark
again. The table gives the growth (the reader's peak over the process after its imports)
and the absolute peak (transformers' includes torch, which its import brings in); the 16
frames themselves are 16 * 360 * 640 * 3 bytes = 10.5 MiB.

Run from the repository root (needs PyAV; the transformers column needs transformers):

    PYTHONPATH=python python benches/video_memory.py [--seconds 10 60 240] [--frames 16]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys

from mmfast.bench import bench_clip

# What the child process runs: argv = [path, reader, frames]. The high-water mark is Linux's
# VmHWM (KiB), the peak RSS of the process's own memory since exec: ru_maxrss would also keep
# the parent's peak, which the child inherits across fork and exec (and the parent holds the
# frames of the clips it encoded). Elsewhere ru_maxrss (KiB on Linux, bytes on macOS).
CHILD = """
import json, resource, sys

def high_water():
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

path, reader, frames = sys.argv[1], sys.argv[2], int(sys.argv[3])
if reader == "mmfast":
    from mmfast.video import load_video
    def read():
        return load_video(path, num_frames=frames)
else:
    from transformers.video_utils import load_video as hf_load
    def read():
        return hf_load(path, backend="pyav", num_frames=frames)
import av, numpy
before = high_water()
video, metadata = read()
after = high_water()
print(json.dumps({"before": before, "after": after, "frames": len(video),
                  "total": metadata.total_num_frames}))
"""


def measure(path: str, reader: str, frames: int) -> dict[str, int]:
    """The child's high-water marks (KiB) before and after reading, in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, path, reader, str(frames)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, nargs="+", default=[10, 60, 240])
    parser.add_argument("--frames", type=int, default=16)
    args = parser.parse_args()
    readers = ["mmfast"]
    if importlib.util.find_spec("transformers") is not None:
        readers.append("transformers")
    else:
        print("transformers not installed: mmfast only")
    print(
        f"peak RSS reading {args.frames} frames of 640x360 H.264 (30 fps): growth over the "
        "process after its imports / absolute peak, MiB"
    )
    print(f"{'clip':>6} {'frames':>7}  " + "  ".join(f"{r:>22}" for r in readers))
    paths = {seconds: str(bench_clip(seconds)) for seconds in args.seconds}  # made first
    for seconds, path in paths.items():
        cells = []
        total = 0
        for reader in readers:
            m = measure(path, reader, args.frames)
            total = m["total"]
            growth, peak = (m["after"] - m["before"]) / 1024, m["after"] / 1024
            cells.append(f"{growth:10.1f} / {peak:9.1f}")
        print(f"{seconds:>5}s {total:>7}  " + "  ".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
