#!/usr/bin/env python3
"""A large Nsight Systems SQLite export made from a real one, for benchmarks (issue 23).

    benches/nsys_scale.py IN.sqlite OUT.sqlite [--size-mb 700]

Copies IN (never written) to OUT and appends copies of every table that holds timed events
(those with a `start` column: CUPTI activity, NVTX, OS runtime, memory events, ...) until OUT
is about --size-mb. Copy k is shifted by k times the capture's span, so copies follow each
other rather than overlap; its correlation ids are offset past every earlier copy's, so a
kernel still links to exactly one runtime call; call chain ids (and the call chain tables'
rows) are offset alike, and `ProfilerStep#N` NVTX ranges are renumbered so that steps stay
distinct. Names (StringIds), devices, streams and threads are shared by all copies, as in one
long capture of the same program.
"""

import argparse
import os
import shutil
import sqlite3
import sys

CHAIN_TABLES = ("OSRT_CALLCHAINS", "CUDA_CALLCHAINS", "SAMPLING_CALLCHAINS")


def columns(db, table):
    return [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--size-mb", type=float, default=700.0)
    a = ap.parse_args()
    target = a.size_mb * 1e6
    if os.path.abspath(a.input) == os.path.abspath(a.output):
        sys.exit("nsys_scale: the output must be another file than the input")
    shutil.copyfile(a.input, a.output)
    os.chmod(a.output, 0o644)
    db = sqlite3.connect(a.output)
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    timed = [t for t in tables if "start" in columns(db, t) and t not in CHAIN_TABLES]
    # The original rows of each table, by rowid: every copy is made of these alone.
    rows = {t: db.execute(f'SELECT max(rowid) FROM "{t}"').fetchone()[0] or 0 for t in timed}
    chains = [t for t in CHAIN_TABLES if t in tables]
    chain_rows = {t: db.execute(f'SELECT max(rowid) FROM "{t}"').fetchone()[0] or 0 for t in chains}

    def span_of(col_max, col_min):
        hi, lo = [], []
        for t in timed:
            cols = columns(db, t)
            if col_max in cols:
                hi.append(db.execute(f'SELECT max("{col_max}") FROM "{t}"').fetchone()[0])
            if col_min in cols:
                lo.append(db.execute(f'SELECT min("{col_min}") FROM "{t}"').fetchone()[0])
        hi = [v for v in hi if v is not None]
        lo = [v for v in lo if v is not None]
        return (max(hi) if hi else 0), (min(lo) if lo else 0)

    end_max, start_min = span_of("end", "start")
    start_max, _ = span_of("start", "start")
    # One copy's span, plus a gap that is not a whole number of steps.
    span = max(end_max, start_max) - start_min + 1_000_003
    corr_max = 0
    for t in timed:
        if "correlationId" in columns(db, t):
            corr_max = max(corr_max, db.execute(f'SELECT max(correlationId) FROM "{t}"').fetchone()[0] or 0)
    chain_max = 0
    for t in chains:
        chain_max = max(chain_max, db.execute(f'SELECT max(id) FROM "{t}"').fetchone()[0] or 0)
    steps = db.execute(
        "SELECT count(*) FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%'"
    ).fetchone()[0] if "NVTX_EVENTS" in timed else 0
    step_base = db.execute(
        "SELECT max(CAST(substr(text, 14) AS INTEGER)) + 1 FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%'"
    ).fetchone()[0] if steps else 0

    def copy(k):
        for t in timed:
            cols = columns(db, t)
            sel = []
            for c in cols:
                q = f'"{c}"'
                if c in ("start", "end"):
                    sel.append(f"{q} + {k * span}")
                elif c == "correlationId":
                    sel.append(f"{q} + {k * (corr_max + 1)}")
                elif c == "callchainId" or (c == "id" and t == "COMPOSITE_EVENTS"):
                    sel.append(f"{q} + {k * (chain_max + 1)}")
                elif c == "text" and t == "NVTX_EVENTS" and steps:
                    sel.append(
                        f"CASE WHEN text LIKE 'ProfilerStep#%' THEN 'ProfilerStep#' || "
                        f"(CAST(substr(text, 14) AS INTEGER) + {k * step_base}) ELSE text END"
                    )
                else:
                    sel.append(q)
            names = ", ".join(f'"{c}"' for c in cols)
            db.execute(
                f'INSERT INTO "{t}" ({names}) SELECT {", ".join(sel)} FROM "{t}" WHERE rowid <= {rows[t]}'
            )
        for t in chains:
            cols = columns(db, t)
            sel = [f'"{c}" + {k * (chain_max + 1)}' if c == "id" else f'"{c}"' for c in cols]
            names = ", ".join(f'"{c}"' for c in cols)
            db.execute(
                f'INSERT INTO "{t}" ({names}) SELECT {", ".join(sel)} FROM "{t}" WHERE rowid <= {chain_rows[t]}'
            )
        db.commit()

    k = 1
    while os.path.getsize(a.output) < target:
        copy(k)
        k += 1
    db.close()
    print(f"{a.output}: {k} copies of {a.input}, {os.path.getsize(a.output) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
