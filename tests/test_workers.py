"""The core's worker pool as servers use it: after fork, across many ``threads`` values, and
bounded by ``MMFAST_NUM_THREADS``.

Each check runs in a fresh interpreter (``subprocess``), so the pool it builds, and the
threads it counts, are its own and not those this test process made earlier.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="counts threads in /proc/self/task"
)

# A parent that has used the pool with 2 threads, then a pool of worker processes made by
# `method`, each calling with 2 threads: before the pool was fork-safe, a forked child never
# returned from that call. The workers return digests of their outputs: the outputs
# themselves (235 MB) took about 60 s to come back through forkserver's pipes on a 2-vCPU
# EPYC, the whole of the test's timeout.
FORKED = """
import hashlib, multiprocessing, sys, warnings
import numpy as np
import mmfast

# The interpreter warns that fork() in a threaded process may deadlock: what is tested here.
warnings.simplefilter("ignore", DeprecationWarning)
PROC = mmfast.ImageProcessor.from_pretrained("Qwen/Qwen2-VL-7B-Instruct")
RNGS = [np.random.default_rng(i) for i in range(4)]
IMAGES = [rng.integers(0, 256, (480, 640, 3), dtype=np.uint8) for rng in RNGS]

def work(seed):
    out = PROC(IMAGES[seed % 4 :] + IMAGES[: seed % 4], threads=2)
    return hashlib.sha256(out.pixel_values.tobytes()).hexdigest()

if __name__ == "__main__":
    method = sys.argv[1]
    parent = [work(seed) for seed in range(4)]
    with multiprocessing.get_context(method).Pool(2) as pool:
        children = pool.map_async(work, range(8)).get(timeout=60)
    assert children == parent * 2, "a child's outputs differ from the parent's"
    print("ok")
"""


def run_python(code: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Runs ``code`` as a script file (so that spawned children can import its functions)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    result = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_worker_processes_run_after_the_parent_used_the_pool(method: str, tmp_path: Path) -> None:
    assert run_python(FORKED, tmp_path, method).strip() == "ok"


# The locks mmfast's Python code holds, each held by another thread of the parent at the
# fork: the forked child decodes bytes and wraps a transformers processor all the same.
LOCKS_HELD_AT_FORK = """
import io, os, signal, threading, warnings
import numpy as np
from PIL import Image
import mmfast
from mmfast import hf, image

warnings.simplefilter("ignore", DeprecationWarning)  # fork() in a threaded process
buffer = io.BytesIO()
Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(buffer, "PNG")
held, release = threading.Event(), threading.Event()

def hold():
    with image._OPEN_LOCK, hf._lock:
        held.set()
        release.wait()

thread = threading.Thread(target=hold)
thread.start()
held.wait()
pid = os.fork()
if pid == 0:
    signal.alarm(20)  # a hang ends the child with SIGALRM
    mmfast.decode_image(buffer.getvalue())
    with hf._lock:
        pass
    os._exit(0)
_, status = os.waitpid(pid, 0)
release.set()
thread.join()
print(os.waitstatus_to_exitcode(status))
"""


def test_locks_held_by_other_threads_at_fork_do_not_hang_the_child(tmp_path: Path) -> None:
    """A parent's thread decoding a TIFF held the lock that silences Pillow's warnings when
    the server forked: the child's first decode of bytes waited on it forever."""
    assert run_python(LOCKS_HELD_AT_FORK, tmp_path).strip() == "0"


# Calls with threads=1..40 in one process; prints the OS threads before and after.
THREADS = """
import os
import numpy as np
import mmfast

def os_threads():
    return len(os.listdir("/proc/self/task"))

proc = mmfast.ImageProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf")
rngs = [np.random.default_rng(i) for i in range(6)]
images = [rng.integers(0, 256, (300, 400, 3), dtype=np.uint8) for rng in rngs]
before = os_threads()
first = proc(images, threads=1).pixel_values
for threads in range(1, 41):
    assert (proc(images, threads=threads).pixel_values == first).all(), threads
print(before, os_threads())
"""


@pytest.mark.parametrize("pool", [None, "1", "3"])
def test_threads_do_not_pile_up(pool: str | None, tmp_path: Path) -> None:
    """One pool, sized once: MMFAST_NUM_THREADS (or the cores) threads, the caller being one,
    whatever ``threads`` the calls ask for."""
    env = {} if pool is None else {"MMFAST_NUM_THREADS": pool}
    before, after = map(int, run_python(THREADS, tmp_path, env=env).split())
    size = int(pool) if pool is not None else len(os.sched_getaffinity(0))
    assert after - before == size - 1
