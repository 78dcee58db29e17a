"""What the phases.py / membound.py captures show, read back from the traces with plain Python.

For each capture, reads the Kineto trace (gzip + json) or the Nsight Systems export (sqlite.gz) and writes
what is visible in it (event names, thread ids and names, counts, durations, kernel time shares, bandwidth
from kernel durations) into its truth file under "observed_in_trace". Independent of tracehound: the
tests can hold tracehound to these figures.

usage: python3 captures2_observe.py SAMPLE_TRACES_DIR   (the folder holding kineto/, nsys/, reference/)
"""
import collections, gzip, json, os, re, sqlite3, statistics, sys, tempfile

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")


def load(name):
    return json.load(gzip.open(os.path.join(ROOT, "kineto", f"h200_{name}.pt.trace.json.gz")))


def truth_path(name, suffix="kineto"):
    return os.path.join(ROOT, "reference", f"h200_{name}.{suffix}.truth.json")


def union_us(iv):
    tot, cs, ce = 0.0, None, None
    for s, e in sorted(iv):
        if cs is None or s > ce:
            if cs is not None:
                tot += ce - cs
            cs, ce = s, e
        else:
            ce = max(ce, e)
    return tot + (ce - cs if cs is not None else 0.0)


def r(x, n=3):
    return round(x, n)


def common(t):
    ev = t["traceEvents"]
    X = [e for e in ev if e.get("ph") == "X"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
    steps = sorted([e for e in X if e["name"].startswith("ProfilerStep#") and e.get("cat") == "user_annotation"],
                   key=lambda e: e["ts"])
    w0, w1 = steps[0]["ts"], steps[-1]["ts"] + steps[-1]["dur"]
    gpu = [e for e in X if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    busy = union_us([(max(e["ts"], w0), min(e["ts"] + e["dur"], w1)) for e in gpu if e["ts"] < w1 and e["ts"] + e["dur"] > w0])
    host = collections.defaultdict(collections.Counter)
    for e in X:
        if e.get("cat") in ("cpu_op", "python_function", "user_annotation", "cuda_runtime", "cuda_driver"):
            host[e["tid"]][e["cat"]] += 1
    threads = [{"tid": tid, "thread_name_metadata": names.get(tid), "events": dict(c)} for tid, c in sorted(host.items(), key=lambda kv: -sum(kv[1].values()))]
    g0 = min((e["ts"] for e in gpu), default=w0)
    g1 = max((e["ts"] + e["dur"] for e in gpu), default=w1)
    span0, span1 = min(w0, g0), max(w1, g1)
    busy_all = union_us([(e["ts"], e["ts"] + e["dur"]) for e in gpu])
    out = {
        "events": len(ev),
        "by_category": dict(collections.Counter(e.get("cat") for e in X).most_common()),
        "profiler_steps": [{"name": s["name"], "ms": r(s["dur"] / 1e3)} for s in steps],
        "window_ms": r((w1 - w0) / 1e3),
        "gpu_busy_ms_in_window": r(busy / 1e3),
        "gpu_busy_share_of_window": r(busy / (w1 - w0)),
        "window": "first ProfilerStep# start to last ProfilerStep# end (host side); GPU work can run past it",
        "span_ms_steps_and_gpu": r((span1 - span0) / 1e3),
        "gpu_busy_share_of_span": r(busy_all / (span1 - span0)),
        "host_threads": threads,
    }
    return ev, X, names, steps, out


def step_of(steps, ts):
    for i, s in enumerate(steps):
        if s["ts"] <= ts <= s["ts"] + s["dur"]:
            return i
    return None


def kernel_classes(X, steps=None):
    k = [e for e in X if e.get("cat") == "kernel"]
    tot = sum(e["dur"] for e in k)

    def cls(n):
        if re.search(r"gemm|nvjet|cutlass|xmma|cublas", n, re.I):
            return "matrix (cuBLAS GEMM)"
        if n.startswith("triton_"):
            return "triton (inductor, fused)"
        if "multi_tensor_apply" in n:
            return "optimizer multi-tensor"
        if "layer_norm" in n or "GammaBeta" in n:
            return "ATen layer_norm"
        if "reduce_kernel" in n:
            return "ATen reduce_kernel"
        if "elementwise_kernel" in n:
            return "ATen elementwise"
        return "other"
    t = collections.Counter()
    c = collections.Counter()
    for e in k:
        t[cls(e["name"])] += e["dur"]
        c[cls(e["name"])] += 1
    return {"kernels": len(k), "kernel_ms": r(tot / 1e3),
            "share_of_kernel_time": {n: r(d / tot) for n, d in t.most_common()},
            "count": dict(c),
            "classification": "by kernel name: gemm|nvjet|cutlass|xmma|cublas = matrix; triton_* = inductor; "
                              "multi_tensor_apply = optimizer; layer_norm/GammaBeta; reduce_kernel; elementwise_kernel"}


def write(name, obs, suffix="kineto"):
    p = truth_path(name, suffix)
    t = json.load(open(p))
    t["observed_in_trace"] = obs
    json.dump(t, open(p, "w"), indent=1)
    print(name, suffix, "ok")


# ------------------------------------------------------------------ issue 21

def compile_recompile():
    ev, X, names, steps, out = common(load("compile_recompile"))
    keys = ["entire_frame_compile", "entire_backward_compile", "dynamo", "backend_compile", "inductor_compile",
            "_compile.compile_inner (dynamo_timed)", "backward._backward_impl (dynamo_timed)",
            "CachingAutotuner.benchmark_all_configs (dynamo_timed)", "async_compile.wait (dynamo_timed)",
            "CompiledFunctionBackward", "CompiledFunction"]
    per = []
    for i, s in enumerate(steps):
        inside = [e for e in X if step_of(steps, e["ts"]) == i]
        spans = collections.defaultdict(list)
        for e in inside:
            if e["name"] in keys:
                spans[e["name"]].append((r(e["dur"] / 1e3, 1), e["tid"]))
        regions = sorted({e["name"] for e in inside if e["name"].startswith("Torch-Compiled Region")})
        dims = [e["args"].get("Input Dims") for e in inside if e["name"] == "CompiledFunction" and "Input Dims" in e.get("args", {})]
        seq = None
        for d in (dims[0] if dims else []):
            if isinstance(d, list) and len(d) == 3 and d[0] == 16 and d[2] == 256:
                seq = d[1]
                break
        per.append({"step": i, "ms": r(s["dur"] / 1e3, 1), "compiled_regions": regions,
                    "spans_ms_tid": {k: v for k, v in spans.items()},
                    "benchmark_all_configs_spans": len(spans.get("CachingAutotuner.benchmark_all_configs (dynamo_timed)", [])),
                    "input_seq_len_from_CompiledFunction_Input_Dims": seq})
    timed = collections.Counter(e["name"] for e in X if e["name"].endswith("(dynamo_timed)"))
    out.update({
        "per_step": per,
        "recompiled_steps_seen": [p["step"] for p in per if "entire_frame_compile" in p["spans_ms_tid"]],
        "dynamo_timed_span_names": len(timed),
        "dynamo_timed_spans": sum(timed.values()),
        "span_category": "the (dynamo_timed) and phase spans (entire_frame_compile, entire_backward_compile, "
                         "backend_compile, inductor_compile ...) are cpu_op events; '<name>_data: compile_id=0/N' "
                         "user_annotation events of ~0 duration carry the compile ids",
        "forward_compile_thread": "main thread (entire_frame_compile); the lazy backward compile "
                                  "(entire_backward_compile inside CompiledFunctionBackward) runs on the autograd engine thread",
        "autotuned_kernels": sorted({re.sub(r",.*", "", e["name"].split("kernel_name=")[1]) for e in X
                                     if e["name"].startswith("CachingAutotuner.benchmark_all_configs_data")}),
    })
    write("compile_recompile", out)


def gil_thread():
    ev, X, names, steps, out = common(load("gil_thread"))
    w = [tid for tid, n in names.items() if "metrics-writer" in n]
    wt = w[0] if w else None
    main = steps[0]["tid"]
    dumps = [e for e in X if e["tid"] == wt and e["name"].startswith("json/__init__.py") and e["name"].endswith("dumps")]
    w0, w1 = steps[0]["ts"], steps[-1]["ts"] + steps[-1]["dur"]
    in_win = union_us([(max(e["ts"], w0), min(e["ts"] + e["dur"], w1)) for e in dumps if e["ts"] < w1 and e["ts"] + e["dur"] > w0])
    # leaf C calls on the training thread that last far longer than the operators under them (GIL re-acquire)
    ops = [e for e in X if e["tid"] == main and e.get("cat") == "cpu_op"]
    long_c = []
    for e in X:
        if e["tid"] == main and e.get("cat") == "python_function" and e["name"].startswith("<built-in") and e["dur"] > 5000:
            child = union_us([(o["ts"], o["ts"] + o["dur"]) for o in ops if o["ts"] >= e["ts"] and o["ts"] + o["dur"] <= e["ts"] + e["dur"]])
            long_c.append((e["name"][:70], e["dur"], child))
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for n, d, c in long_c:
        agg[n][0] += 1
        agg[n][1] += d
        agg[n][2] += c
    out.update({
        "metrics_thread": {"tid": wt, "thread_name_metadata": names.get(wt),
                           "python_function_events": sum(1 for e in X if e["tid"] == wt and e.get("cat") == "python_function"),
                           "cpu_op_events": sum(1 for e in X if e["tid"] == wt and e.get("cat") == "cpu_op"),
                           "json_dumps_frames": len(dumps), "json_dumps_ms_in_window": r(in_win / 1e3, 1),
                           "json_dumps_share_of_window": r(in_win / (w1 - w0)),
                           "frames": "threading.py _bootstrap > phases.py writer > json/__init__.py dumps > json/encoder.py encode > iterencode"},
        "training_thread": {"tid": main, "thread_name_metadata": names.get(main),
                            "builtin_calls_over_5ms": {n: {"count": v[0], "ms": r(v[1] / 1e3, 1), "aten_ops_inside_ms_union": r(v[2] / 1e3, 2)}
                                                       for n, v in sorted(agg.items(), key=lambda kv: -kv[1][1])[:8]}},
        "note": "the autograd engine thread appears with thread_name 'thread N (python3)' in this trace, not pt_autograd_0: "
                "identify it by its autograd::engine::evaluate_function operators",
    })
    eng = [tid for tid in names if any(e["tid"] == tid and e["name"].startswith("autograd::engine::evaluate_function") for e in X)]
    out["autograd_engine_thread"] = {"tid": eng[0] if eng else None, "thread_name_metadata": names.get(eng[0]) if eng else None}
    write("gil_thread", out)


def autograd(name):
    ev, X, names, steps, out = common(load(name))
    main = steps[0]["tid"]
    ev_f = collections.Counter(e["tid"] for e in X if e["name"].startswith("autograd::engine::evaluate_function"))
    eng = ev_f.most_common(1)[0][0] if ev_f else None
    rb = [e for e in X if e["tid"] == main and e["name"].startswith("<built-in method run_backward")]
    eng_ops = [e for e in X if e["tid"] == eng and e.get("cat") == "cpu_op"]
    launches = collections.Counter(e["tid"] for e in X if e.get("cat") == "cuda_runtime" and "Launch" in e["name"])
    out.update({
        "autograd_engine_thread": {"tid": eng, "thread_name_metadata": names.get(eng),
                                   "evaluate_function_events": ev_f.get(eng, 0), "cpu_ops": len(eng_ops),
                                   "kernel_launch_calls": launches.get(eng, 0)},
        "main_thread": {"tid": main, "thread_name_metadata": names.get(main), "kernel_launch_calls": launches.get(main, 0),
                        "run_backward_frames": len(rb), "run_backward_ms_total": r(sum(e["dur"] for e in rb) / 1e3, 2)},
        "kernels": kernel_classes(X),
        "compiled_backward_nodes": sum(1 for e in X if e["name"] == "autograd::engine::evaluate_function: CompiledFunctionBackward"),
        "note": "thread_name metadata is Kineto's; the engine thread is the one running autograd::engine::evaluate_function "
                "(its name reads pt_autograd_0 in some captures and 'python3' in others)",
    })
    write(name, out)


def gc_heavy():
    ev, X, names, steps, out = common(load("gc_heavy"))
    col = [e for e in X if e["name"] == "<built-in function collect>"]
    cb = [e for e in X if e.get("cat") == "python_function" and e["name"].endswith("_gc_cb")]
    out.update({"gc_collect_frames": {"name": "<built-in function collect>", "count": len(col),
                                      "ms": [r(e["dur"] / 1e3, 2) for e in col], "tid": col[0]["tid"] if col else None,
                                      "parent_frame": "phases.py step (the training step function)"},
                "gc_callback_frames": {"count": len(cb), "ms_total": r(sum(e["dur"] for e in cb) / 1e3, 3)}})
    write("gc_heavy", out)


def gil_thread_nsys():
    z = os.path.join(ROOT, "nsys", "h200_gil_thread_osrt.sqlite.gz")
    with tempfile.NamedTemporaryFile(suffix=".sqlite") as f:
        f.write(gzip.open(z).read())
        f.flush()
        c = sqlite3.connect(f.name)
        names = {g: s for g, s in c.execute("select t.globalTid, s.value from ThreadNames t join StringIds s on s.id=t.nameId")}
        s0, s1 = c.execute("select min(start), max(end) from NVTX_EVENTS where text like 'ProfilerStep#%'").fetchone()
        steps = [{"name": t, "ms": r((e - s) / 1e6)} for t, s, e in c.execute("select text, start, end from NVTX_EVENTS where text like 'ProfilerStep#%' order by start")]
        q = f"""select s.value, o.globalTid, count(*), sum(min(o.end,{s1})-max(o.start,{s0})) from OSRT_API o
                join StringIds s on s.id=o.nameId where o.end>{s0} and o.start<{s1} group by 1,2 order by 4 desc"""
        osrt = [{"call": n, "thread": names.get(g), "tid": g & 0xFFFFFF, "calls": k, "ms_in_window": r(d / 1e6, 1)}
                for n, g, k, d in c.execute(q) if d > 1e6]
        kern = c.execute(f"select count(*), sum(end-start) from CUPTI_ACTIVITY_KIND_KERNEL where end>{s0} and start<{s1}").fetchone()
        py = {p for p, n in c.execute("select pid, name from PROCESSES") if n and "python" in n}
        mine = {g: n for g, n in names.items() if (g >> 24) & 0xFFFFFF in py}
        out = {"tables": sorted(r_[0] for r_ in c.execute("select name from sqlite_master where type='table'") if not r_[0].startswith("ENUM_")),
               "python_process_threads": sorted({f"{g & 0xFFFFFF} {n}" for g, n in mine.items()}),
               "profiler_steps_nvtx": steps, "window_ms": r((s1 - s0) / 1e6),
               "osrt_calls_in_window_over_1ms_total": osrt[:14],
               "kernels_in_window": kern[0], "kernel_ms_in_window": r((kern[1] or 0) / 1e6, 2),
               "osrt_rows": c.execute("select count(*) from OSRT_API").fetchone()[0],
               "note": "GIL waits of the training thread (python3, the process's main thread) are the pthread_cond_timedwait "
                       "calls (CPython 3.12 waits on the GIL condition with a 5 ms timeout); pthread_cond_wait on it is "
                       "run_backward waiting for the engine; pt_autograd_0 waits for the GIL too"}
    write("gil_thread", out, suffix="nsys-osrt")


# ------------------------------------------------------------------ issue 22

def membound(name):
    ev, X, names, steps, out = common(load(name))
    out["kernels"] = kernel_classes(X)
    write(name, out)


def stream_roof():
    ev, X, names, steps, out = common(load("stream_roof"))
    nb = 1 << 32
    ops = {e["args"]["External id"]: e for e in X if e.get("cat") == "cpu_op" and e["name"] in ("aten::mul_", "aten::add_")
           and "External id" in e.get("args", {})}
    per_op = collections.defaultdict(list)
    for e in X:
        if e.get("cat") == "kernel" and e.get("args", {}).get("External id") in ops:
            per_op[e["args"]["External id"]].append(e)
    by = collections.defaultdict(list)
    kpo = collections.Counter()
    for xid, ks in per_op.items():
        op = ops[xid]["name"]
        b = 3 * nb if op == "aten::add_" else 2 * nb
        by[op].append((sum(k["dur"] for k in ks), b, [k["dur"] for k in ks]))
        kpo[len(ks)] += 1
    res = {}
    for op, rows in by.items():
        med = statistics.median(d for d, _, _ in rows)
        b = rows[0][1]
        res[op] = {"ops": len(rows), "kernels_per_op": sorted({len(k) for _, _, k in rows}),
                   "median_op_kernel_time_us": r(med, 1), "bytes_per_op": b,
                   "kernel_us_first_op": rows[0][2], "achieved_TBps": r(b / (med * 1e-6) / 1e12)}
    tot_b = sum(b for rows in by.values() for _, b, _ in rows)
    tot_t = sum(d for rows in by.values() for d, _, _ in rows)
    out.update({"kernels": kernel_classes(X), "bandwidth_per_aten_op_from_kernel_durations": res,
                "kernels_per_op_histogram": dict(kpo),
                "note": "each in-place op over a 4 GiB tensor launches 2 kernels (TensorIterator splits it for 32-bit "
                        "indexing), each moving half the op's bytes: a bytes model must divide an op's bytes among its kernels",
                "all_ops_TBps": r(tot_b / (tot_t * 1e-6) / 1e12), "share_of_4.8_TBps": r(tot_b / (tot_t * 1e-6) / 1e12 / 4.8),
                "input_dims_recorded": sorted({json.dumps(e["args"].get("Input Dims")) for e in ops.values()})})
    write("stream_roof", out)


if __name__ == "__main__":
    compile_recompile()
    gil_thread()
    autograd("autograd_backward_heavy")
    autograd("autograd_backward_heavy_compiled")
    gc_heavy()
    if os.path.exists(os.path.join(ROOT, "nsys", "h200_gil_thread_osrt.sqlite.gz")):
        gil_thread_nsys()
    for n in ("unfused_norm_gelu", "fused_norm_gelu", "compiled_fused_clean", "gemm_bound_clean"):
        membound(n)
    stream_roof()
