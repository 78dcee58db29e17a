"""Helpers for the package's tests: the project's traces, the shared developer set, the CLI
binary the package must agree with, and the developer tool that generates large jobs."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OWN = ROOT / "sample-traces"
SHARED = ROOT.parent / "shared" / "sample-traces"


def cli_binary():
    """The `tracehound` binary built from the same tree: TRACEHOUND_BIN (set by .ci/run), else
    the debug build in CARGO_TARGET_DIR or target/."""
    env = os.environ.get("TRACEHOUND_BIN")
    if env:
        return env
    for base in [os.environ.get("CARGO_TARGET_DIR"), ROOT / "target"]:
        if base and (Path(base) / "debug" / "tracehound").exists():
            return str(Path(base) / "debug" / "tracehound")
    return shutil.which("tracehound")


def dev_binary():
    """The developer tool `tracehound-dev` (xtask/) built from the same tree: TRACEHOUND_DEV_BIN,
    else the one beside the CLI binary (cargo builds both into the same directory)."""
    env = os.environ.get("TRACEHOUND_DEV_BIN")
    if env:
        return env
    exe = cli_binary()
    if exe and (Path(exe).parent / "tracehound-dev").exists():
        return str(Path(exe).parent / "tracehound-dev")
    return shutil.which("tracehound-dev")


def runner(exe, what):
    """Runs `exe`; returns (exit code, stdout, stderr)."""
    if exe is None:
        pytest.fail(f"no {what} binary: build it (cargo build) or set its path")

    def run(*args):
        p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    return run


@pytest.fixture(scope="session")
def cli():
    """Runs the CLI (`tracehound`, TRACEHOUND_BIN); returns (exit code, stdout, stderr)."""
    return runner(cli_binary(), "tracehound")


@pytest.fixture(scope="session")
def dev():
    """Runs the developer tool (`tracehound-dev`, TRACEHOUND_DEV_BIN): the scale generator."""
    return runner(dev_binary(), "tracehound-dev")


def shared(rel):
    """A path in ../shared/sample-traces, or a skip with a message when ../shared is absent."""
    p = SHARED / rel
    if not p.exists():
        pytest.skip(f"{p} is absent (../shared is not next to this clone)")
    return p


def cli_json(cli, *args):
    code, out, err = cli(*args, "--format", "json")
    assert code == 0, err
    return json.loads(out)
