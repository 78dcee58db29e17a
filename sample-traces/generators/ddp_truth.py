"""Measures a two-rank Kineto job with plain Python, independently of tracehound, and adds the
figures to its truth file under "measured_from_traces":

  per rank: NCCL kernels (count, total ms), NCCL time no other kernel/memcpy/memset overlaps
  (exposed ms), inside the ProfilerStep window;
  per collective (the n-th NCCL kernel of each rank): start skew rank1 - rank0 in us (both ranks
  ran on one host, so their clocks agree), and which rank arrived last (started last).

usage: python3 ddp_truth.py JOB_DIR TRUTH_JSON
"""
import gzip, json, sys


def load(path):
    with (gzip.open(path) if path.endswith(".gz") else open(path)) as f:
        return json.load(f)["traceEvents"]


def union(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def covered(u, s, e):
    return sum(max(0, min(b, e) - max(a, s)) for a, b in u)


def rank(path):
    ev = load(path)
    steps = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "user_annotation"
             and e.get("name", "").startswith("ProfilerStep#")]
    lo = min(e["ts"] for e in steps)
    gpu = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    nccl = sorted([e for e in gpu if e["cat"] == "kernel" and "nccl" in e["name"].lower() and e["ts"] >= lo],
                  key=lambda e: e["ts"])
    other = union([(e["ts"], e["ts"] + e["dur"]) for e in gpu if e not in nccl])
    exposed = sum(e["dur"] - covered(other, e["ts"], e["ts"] + e["dur"]) for e in nccl)
    return nccl, {"nccl_kernels": len(nccl), "nccl_ms": round(sum(e["dur"] for e in nccl) / 1e3, 3),
                  "exposed_nccl_ms": round(exposed / 1e3, 3)}


if __name__ == "__main__":
    job, truth_path = sys.argv[1], sys.argv[2]
    k0, r0 = rank(f"{job}/rank0.pt.trace.json.gz")
    k1, r1 = rank(f"{job}/rank1.pt.trace.json.gz")
    skew = [round(b["ts"] - a["ts"], 1) for a, b in zip(k0, k1)]
    truth = json.load(open(truth_path))
    truth["measured_from_traces"] = {
        "how": "generators/ddp_truth.py: plain Python over the two Kineto files",
        "ranks": [r0, r1],
        "start_skew_rank1_minus_rank0_us": skew,
        "last_to_arrive": [1 if s > 0 else 0 for s in skew],
        "wait_ms_by_duration": [
            round(sum(max(0, a["dur"] - b["dur"]) for a, b in zip(k0, k1)) / 1e3, 3),
            round(sum(max(0, b["dur"] - a["dur"]) for a, b in zip(k0, k1)) / 1e3, 3),
        ],
    }
    json.dump(truth, open(truth_path, "w"), indent=1)
    print(json.dumps(truth["measured_from_traces"])[:600])
