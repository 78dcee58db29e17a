"""tracehound: find where GPU time is lost in PyTorch profiler (Kineto), Nsight Systems and
nvidia-smi traces.

The same crates as the ``tracehound`` command line, in-process::

    import tracehound
    report = tracehound.analyze("rank0.pt.trace.json.gz")      # the JSON report, as a dict
    trace = tracehound.load("rank0.pt.trace.json.gz")         # keep the trace in memory
    trace.findings()                                          # ranked findings (HTML in Jupyter)
    kernels = trace.tables()["kernels"]                       # a pyarrow.Table
    kernels.to_pandas(); polars.from_arrow(kernels)

Whole jobs: ``rank_summary`` is the map (one rank), ``merge`` the reduce;
``tracehound.ray.analyze_job`` runs both on a Ray cluster.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ._tracehound import TABLES, NativeTrace, TracehoundError, __version__
from . import _tracehound as _native

__all__ = [
    "TABLES",
    "Findings",
    "Trace",
    "TracehoundError",
    "__version__",
    "analyze",
    "load",
    "merge",
    "rank_summary",
]

PathLike = Union[str, "os.PathLike[str]"]


def _paths(path: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    if isinstance(path, (str, os.PathLike)):
        return [os.fspath(path)]
    return [os.fspath(p) for p in path]


def _warn(messages: Iterable[str]) -> None:
    for m in messages:
        warnings.warn(m, stacklevel=3)


def analyze(
    path: Union[PathLike, Sequence[PathLike]],
    *,
    gap_threshold_us: Optional[float] = None,
    window_ms: Optional[Tuple[float, float]] = None,
    utc_offset: Optional[float] = None,
    max_memory: Optional[str] = None,
    top: Optional[int] = None,
    rules: Optional[Sequence[str]] = None,
    skip_rules: Optional[Sequence[str]] = None,
) -> Dict[str, Any]:
    """The report of ``tracehound analyze --format json``, as a dict.

    ``path`` is a trace (Kineto JSON, plain or gzip; Nsight Systems SQLite), a list of files
    (a trace with the nvidia-smi logs recorded beside it), or one directory holding the rank
    traces of a job (the job report). Options are the CLI's flags (``gap_threshold_us=None``
    is the CLI's default, 100 µs; ``rules`` and ``skip_rules`` are rule ids). Raises
    :class:`TracehoundError` with the CLI's message for a file it cannot read.
    """
    doc, notes = _native.analyze_json(
        _paths(path),
        gap_threshold_us=gap_threshold_us,
        window_ms=window_ms,
        utc_offset=utc_offset,
        max_memory=max_memory,
        top=top,
        rules=None if rules is None else list(rules),
        skip_rules=None if skip_rules is None else list(skip_rules),
    )
    _warn(notes)
    return json.loads(doc)


class Findings(list):
    """Ranked findings (the JSON report's objects): a list of dicts that renders as the
    report's findings section in Jupyter."""

    def _repr_html_(self) -> str:
        return _native.findings_html(json.dumps(list(self)))


class Trace:
    """One trace, loaded and analysed, kept in memory: its findings, summary, reports and the
    model's tables. Renders as the HTML report in Jupyter."""

    def __init__(self, native: NativeTrace):
        self._native = native

    @property
    def source(self) -> str:
        """The file it was read from."""
        return self._native.source

    @property
    def rank(self) -> Optional[int]:
        """The rank the trace records (Kineto ``distributedInfo``), if any."""
        return self._native.rank

    @property
    def warnings(self) -> List[str]:
        """What the loader warned about."""
        return self._native.warnings

    def findings(self) -> Findings:
        """The ranked findings, as in the JSON report."""
        return Findings(json.loads(self._native.findings_json()))

    def summary(self) -> Dict[str, Any]:
        """The summary (window, devices, verdict, roofline, memory-bound operators, stack),
        as in the JSON report."""
        return json.loads(self._native.summary_json())

    def tables(self, names: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """The model's tables (``TABLES``, columns in docs/tables.md) as ``pyarrow.Table``\\ s,
        handed over through the Arrow C stream interface. ``names`` picks some."""
        return self._native.tables(None if names is None else list(names))

    def report(self, format: str = "table", top: Optional[int] = None) -> str:
        """The report as the CLI prints it: ``table``, ``json``, ``md``, ``html``, ``junit``."""
        return self._native.report(format, top)

    def rank_summary(self, rank: Optional[int] = None) -> str:
        """This rank's summary for :func:`merge` (JSON text)."""
        return self._native.rank_summary(rank)

    def _repr_html_(self) -> str:
        return self._native.html()

    def __repr__(self) -> str:
        findings = json.loads(self._native.findings_json())
        top = findings[0]["title"] if findings else "no findings"
        return f"<tracehound.Trace {self.source}: {len(findings)} findings; top: {top}>"


def load(
    path: Union[PathLike, Sequence[PathLike]],
    *,
    gap_threshold_us: Optional[float] = None,
    window_ms: Optional[Tuple[float, float]] = None,
    utc_offset: Optional[float] = None,
    max_memory: Optional[str] = None,
    rules: Optional[Sequence[str]] = None,
    skip_rules: Optional[Sequence[str]] = None,
) -> Trace:
    """Loads and analyses one trace (with the nvidia-smi logs beside it, given as a list).
    Options are :func:`analyze`'s. The GIL is released while it reads and analyses."""
    native = _native.load(
        _paths(path),
        gap_threshold_us=gap_threshold_us,
        window_ms=window_ms,
        utc_offset=utc_offset,
        max_memory=max_memory,
        rules=None if rules is None else list(rules),
        skip_rules=None if skip_rules is None else list(skip_rules),
    )
    _warn(native.warnings)
    return Trace(native)


def rank_summary(
    path: PathLike,
    rank: Optional[int] = None,
    *,
    gap_threshold_us: Optional[float] = None,
    max_memory: Optional[str] = None,
) -> str:
    """One rank's summary (JSON text), as ``tracehound analyze TRACE --rank-summary OUT``
    writes it: the map of a job analysis. ``rank`` is used when the trace records none."""
    return _native.rank_summary(
        os.fspath(path), rank, gap_threshold_us=gap_threshold_us, max_memory=max_memory
    )


def merge(
    summaries: Iterable[Union[str, PathLike]],
    *,
    name: Optional[str] = None,
    format: str = "json",
) -> Union[Dict[str, Any], str]:
    """The job report from rank summaries, as ``tracehound merge`` gives it: the same document
    as ``analyze`` on the job's directory. ``summaries`` are summary texts (from
    :func:`rank_summary`) or paths of summary files. ``format="json"`` returns a dict,
    ``table`` and ``md`` the text."""
    items = []
    for k, s in enumerate(summaries):
        if isinstance(s, str) and s.lstrip().startswith("{"):
            items.append((f"summary {k}", s))
        else:
            with open(os.fspath(s), encoding="utf-8") as f:
                items.append((os.fspath(s), f.read()))
    text = _native.merge(items, name=name, format=format)
    return json.loads(text) if format == "json" else text
