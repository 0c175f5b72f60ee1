#!/usr/bin/env python3
"""Fetches Debian sid's Prometheus, promtool and vmagent into a cache directory, for the tests that
run them beside the machine's own (Debian 12: Prometheus 2.42, vmagent 1.79). docs/TESTING.md,
"External tools".

Nothing is installed system-wide. An apt sources entry for suite `sid` is built from the machine's
own Debian entry (its URI and keyring, from /etc/apt/sources.list.d/*.sources, *.list or
/etc/apt/sources.list); `apt-get update` and `apt-get download` run with that list only and with
their own state and cache directories under the cache; `dpkg-deb -x` unpacks the packages there,
and only the three binaries are kept:

    <cache>/bin/prometheus   (package prometheus)
    <cache>/bin/promtool     (package promtool)
    <cache>/bin/vmagent      (package victoria-metrics)
    <cache>/VERSIONS         (the package versions, one `package version` a line)

The cache is `$VLLM_CORRECTOR_SID_TOOLS`, else `target/debian-sid` of this repository (so `cargo
clean` and a fresh clone start without it). When the three binaries are there and run, nothing is
fetched. The versions asked for are PINNED below; when sid has moved past one, its current version
is fetched instead and the script says so. The binaries need glibc >= 2.34 (and vmagent libzstd),
which Debian 12 has.

Usage: scripts/fetch_sid_tools.py [--print-dir]
Exit status: 0 when the binaries are there and run, 1 otherwise (the reason on stderr).
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# package -> (version asked for, binaries kept from it)
PINNED = {
    "prometheus": ("3.5.3+ds1-6", ["prometheus"]),
    "promtool": ("3.5.3+ds1-6", ["promtool"]),
    "victoria-metrics": ("1.145.0+ds1-2", ["vmagent"]),
}
DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def cache_dir():
    return os.environ.get("VLLM_CORRECTOR_SID_TOOLS") or os.path.join(ROOT, "target", "debian-sid")


def binaries_run(directory):
    """True when every kept binary is in `directory`/bin and answers its version or help flag."""
    for _, names in PINNED.values():
        for name in names:
            path = os.path.join(directory, "bin", name)
            flag = "-help" if name == "vmagent" else "--version"
            try:
                subprocess.run([path, flag], check=True, capture_output=True, timeout=30)
            except (OSError, subprocess.SubprocessError):
                return False
    return True


def deb822_entries(text):
    """The stanzas of a deb822 .sources file as dicts (field names lowercased)."""
    entries, current, last = [], {}, None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                entries.append(current)
            current, last = {}, None
        elif line[0] in " \t" and last:
            current[last] += "\n" + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            last = key.strip().lower()
            current[last] = value.strip()
    if current:
        entries.append(current)
    return entries


def one_line_entries(text):
    """`deb [options] URI suite components...` lines of a .list file, as deb822-like dicts."""
    entries = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(r"^(deb)\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
        if not match:
            continue
        options = dict(o.split("=", 1) for o in (match.group(2) or "").split() if "=" in o)
        entry = {"types": "deb", "uris": match.group(3), "suites": match.group(4),
                 "components": match.group(5)}
        if "signed-by" in options:
            entry["signed-by"] = options["signed-by"]
        entries.append(entry)
    return entries


def machine_codename():
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VERSION_CODENAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def debian_entry():
    """(URI, keyring) of the machine's own Debian archive entry (its release suite, not -security).
    Raises SystemExit with the reason when there is none."""
    codename = machine_codename()
    candidates = []
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        with open(path, encoding="utf-8") as f:
            candidates += deb822_entries(f.read())
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                candidates += one_line_entries(f.read())
    for entry in candidates:
        if entry.get("enabled", "yes").lower() == "no" or "deb" not in entry.get("types", "").split():
            continue
        suites = entry.get("suites", "").split()
        if codename not in suites or "security" in entry.get("uris", ""):
            continue
        uri = entry["uris"].split()[0]
        keyring = entry.get("signed-by", "").strip() or DEFAULT_KEYRING
        return uri, keyring
    sys.exit(f"fetch_sid_tools: no Debian entry for suite {codename!r} in /etc/apt: cannot build a sid entry")


def apt(work, *args):
    """apt-get with only the sid list, and state and cache under `work`."""
    options = [
        "-o", f"Dir::Etc::SourceList={work}/sid.sources",
        "-o", f"Dir::Etc::SourceParts={work}/sources.list.d",
        "-o", f"Dir::State::Lists={work}/lists",
        "-o", f"Dir::Cache={work}/cache",
        "-o", "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
        "-o", "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
        "-o", "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false",
        "-o", "Acquire::IndexTargets::deb::CNF::DefaultEnabled=false",
        "-o", "Acquire::Languages=none",
    ]
    if os.geteuid() == 0:
        # _apt cannot read the work directory; the download is of public packages.
        options += ["-o", "APT::Sandbox::User=root"]
    return subprocess.run(["apt-get", "-q", *options, *args], cwd=work, capture_output=True, text=True)


def fetch(dest):
    uri, keyring = debian_entry()
    work = tempfile.mkdtemp(prefix="apt-", dir=os.path.dirname(dest) or ".")
    try:
        for sub in ["lists/partial", "cache/archives/partial", "sources.list.d", "root"]:
            os.makedirs(os.path.join(work, sub), exist_ok=True)
        with open(os.path.join(work, "sid.sources"), "w", encoding="utf-8") as f:
            f.write(f"Types: deb\nURIs: {uri}\nSuites: sid\nComponents: main\nSigned-By: {keyring}\n")
        print(f"fetch_sid_tools: apt-get update for sid from {uri}", file=sys.stderr, flush=True)
        out = apt(work, "update")
        if out.returncode != 0:
            sys.exit(f"fetch_sid_tools: apt-get update failed:\n{out.stdout}{out.stderr}")
        versions = {}
        for package, (pinned, _) in PINNED.items():
            out = apt(work, "download", f"{package}={pinned}")
            if out.returncode != 0:
                print(f"fetch_sid_tools: {package} {pinned} is no longer in sid; fetching its current version",
                      file=sys.stderr, flush=True)
                out = apt(work, "download", package)
                if out.returncode != 0:
                    sys.exit(f"fetch_sid_tools: apt-get download {package} failed:\n{out.stdout}{out.stderr}")
            debs = glob.glob(os.path.join(work, f"{package}_*.deb"))
            if len(debs) != 1:
                sys.exit(f"fetch_sid_tools: expected one {package} .deb in {work}, found {debs}")
            version = subprocess.run(["dpkg-deb", "-f", debs[0], "Version"], check=True,
                                     capture_output=True, text=True).stdout.strip()
            versions[package] = version
            subprocess.run(["dpkg-deb", "-x", debs[0], os.path.join(work, "root")], check=True)
            os.remove(debs[0])
        staged = os.path.join(work, "staged")
        os.makedirs(os.path.join(staged, "bin"))
        for _, names in PINNED.values():
            for name in names:
                shutil.move(os.path.join(work, "root", "usr", "bin", name), os.path.join(staged, "bin", name))
        with open(os.path.join(staged, "VERSIONS"), "w", encoding="utf-8") as f:
            for package, version in versions.items():
                f.write(f"{package} {version}\n")
        if os.path.exists(dest):
            shutil.rmtree(dest)
        os.rename(staged, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    dest = cache_dir()
    if not binaries_run(dest):
        os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
        fetch(dest)
        if not binaries_run(dest):
            sys.exit(f"fetch_sid_tools: the binaries in {dest}/bin do not run on this machine "
                     "(they need glibc >= 2.34 and libzstd)")
    if "--print-dir" in sys.argv[1:]:
        print(dest)
    else:
        with open(os.path.join(dest, "VERSIONS"), encoding="utf-8") as f:
            print(f"fetch_sid_tools: {dest}/bin: " + ", ".join(l.strip() for l in f if l.strip()))


if __name__ == "__main__":
    main()
