"""Whole jobs on a Ray cluster: one Ray task per rank runs the map (load, analyse, summarise:
a few kB leave the worker), the driver runs the reduce (:func:`tracehound.merge`).

    import tracehound.ray
    report = tracehound.ray.analyze_job("/shared/job42/*.pt.trace.json.gz")

Needs ``pip install tracehound[ray]``, and tracehound installed on every worker (the same
environment, or ``runtime_env={"pip": ["tracehound"]}``); the traces must be readable at the
same paths on every node (shared storage).
"""

from __future__ import annotations

import glob as _glob
import json
import os
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _tracehound as _native
from . import TracehoundError

__all__ = ["analyze_job", "job_files"]


def job_files(paths_or_glob: Union[str, "os.PathLike[str]", Sequence[str]]) -> Tuple[List[str], Optional[str]]:
    """The files of a job, sorted, and the job's name when it is given as a directory (the
    name ``tracehound analyze DIR`` gives it): a directory (every file in it, as ``analyze
    DIR`` reads it), a glob pattern, or a list of paths."""
    if isinstance(paths_or_glob, (str, os.PathLike)):
        p = os.fspath(paths_or_glob)
        if os.path.isdir(p):
            files = [
                os.path.join(p, n)
                for n in os.listdir(p)
                if not n.startswith(".") and os.path.isfile(os.path.join(p, n))
            ]
            return sorted(files), p
        files = _glob.glob(p)
        if not files and not _glob.has_magic(p):
            files = [p]
        return sorted(files), None
    return sorted(os.fspath(f) for f in paths_or_glob), None


def _map_rank(
    path: str, gap_threshold_us: Optional[float], max_memory: Optional[str], threads: int
) -> Tuple[Optional[str], Optional[str]]:
    return _native.map_rank(
        path, gap_threshold_us=gap_threshold_us, max_memory=max_memory, threads=threads
    )


def analyze_job(
    paths_or_glob: Union[str, "os.PathLike[str]", Sequence[str]],
    address: Optional[str] = None,
    *,
    gap_threshold_us: Optional[float] = None,
    max_memory: Optional[str] = None,
    cpus_per_task: int = 1,
    format: str = "json",
    name: Optional[str] = None,
) -> Union[Dict[str, Any], str]:
    """Analyses a job's rank traces as Ray tasks and returns the job report: the same document
    as ``tracehound analyze DIR --format json`` (a dict; ``format="table"`` or ``"md"`` give
    the text).

    Each task asks Ray for the memory its trace is expected to need (from the file's size, as
    ``--max-memory`` estimates it), so Ray runs as many at once as the nodes hold. ``address``
    is passed to ``ray.init`` when Ray is not initialised yet (None: a local cluster).
    ``max_memory`` is the CLI's ``--max-memory``: a rank whose trace needs more is refused
    on its worker, and the job fails with that rank's message. ``cpus_per_task`` is what each
    task asks Ray for and the threads it then uses (parsing and the rules run in parallel
    within a rank).
    """
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "tracehound.ray needs Ray: pip install 'tracehound[ray]'"
        ) from e
    files, dir_name = job_files(paths_or_glob)
    if not files:
        raise TracehoundError(f"{os.fspath(paths_or_glob) if isinstance(paths_or_glob, (str, os.PathLike)) else 'the file list'}: no trace files")
    if not ray.is_initialized():
        ray.init(address=address)
    # A task asking for more memory than any node has would wait forever: say so instead.
    node_memory: Optional[float] = max(
        (n.get("Resources", {}).get("memory", 0) for n in ray.nodes()), default=None
    )
    remote = ray.remote(_map_rank)
    refs = []
    for f in files:
        need = _native.memory_estimate(f)
        if node_memory and need > node_memory:
            raise TracehoundError(
                f"{f}: needs about {need / 2**30:.1f} GiB to analyse, more than the largest Ray node offers ({node_memory / 2**30:.1f} GiB)"
            )
        refs.append(
            remote.options(memory=need, num_cpus=cpus_per_task).remote(
                f, gap_threshold_us, max_memory, cpus_per_task
            )
        )
    # Every rank's outcome, in file order: a job fails with each failed rank's own message
    # (as the CLI prints them), not with whichever failure Ray happened to see first.
    summaries, errors = [], []
    for f, ref in zip(files, refs):
        try:
            summary, note = ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            if isinstance(e.cause, TracehoundError):
                errors.append(str(e.cause))
                continue
            raise
        if summary is None:
            warnings.warn(note or f"skipped {f}", stacklevel=2)
        else:
            summaries.append((f, summary))
    if errors:
        raise TracehoundError("\n".join(errors))
    if not summaries:
        where = dir_name or "the files given"
        raise TracehoundError(f"{where}: no Kineto or Nsight Systems traces in the directory" if dir_name else f"{where}: no Kineto or Nsight Systems traces")
    text = _native.merge(summaries, name=name or dir_name, format=format)
    return json.loads(text) if format == "json" else text
