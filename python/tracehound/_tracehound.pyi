"""Types of the native module (python/src/lib.rs); the documented API is in __init__.py."""

from typing import Dict, List, Optional, Sequence, Tuple

__version__: str
TABLES: List[str]

class TracehoundError(Exception): ...

class NativeTrace:
    @property
    def source(self) -> str: ...
    @property
    def rank(self) -> Optional[int]: ...
    @property
    def warnings(self) -> List[str]: ...
    def findings_json(self) -> str: ...
    def summary_json(self) -> str: ...
    def report(self, format: str = "table", top: Optional[int] = None) -> str: ...
    def html(self, top: Optional[int] = None) -> str: ...
    def rank_summary(self, rank: Optional[int] = None) -> str: ...
    def tables(self, names: Optional[Sequence[str]] = None) -> Dict[str, object]: ...

def load(
    paths: Sequence[str],
    gap_threshold_us: Optional[float] = None,
    window_ms: Optional[Tuple[float, float]] = None,
    utc_offset: Optional[float] = None,
    max_memory: Optional[str] = None,
    rules: Optional[Sequence[str]] = None,
    skip_rules: Optional[Sequence[str]] = None,
) -> NativeTrace: ...
def analyze_json(
    paths: Sequence[str],
    gap_threshold_us: Optional[float] = None,
    window_ms: Optional[Tuple[float, float]] = None,
    utc_offset: Optional[float] = None,
    max_memory: Optional[str] = None,
    top: Optional[int] = None,
    rules: Optional[Sequence[str]] = None,
    skip_rules: Optional[Sequence[str]] = None,
) -> Tuple[str, List[str]]: ...
def rank_summary(
    path: str,
    rank: Optional[int] = None,
    gap_threshold_us: Optional[float] = None,
    max_memory: Optional[str] = None,
) -> str: ...
def map_rank(
    path: str,
    gap_threshold_us: Optional[float] = None,
    max_memory: Optional[str] = None,
    threads: Optional[int] = None,
) -> Tuple[Optional[str], Optional[str]]: ...
def memory_estimate(path: str) -> int: ...
def merge(
    summaries: Sequence[Tuple[str, str]], name: Optional[str] = None, format: str = "json"
) -> str: ...
def findings_html(findings_json: str) -> str: ...
