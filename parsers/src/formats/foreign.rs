//! Files of other tools, named by what their first bytes show. None of them is read; a file
//! that no reader takes, or that the Kineto reader finds to be another tool's, is refused
//! with what it is ("a Triton Inference Server trace") as well as what it is not. One entry
//! per tool in [`KNOWN`]; TensorFlow timelines and `TORCH_TRACE` compile events are told
//! apart by their event categories, after reading (`kineto::foreign`).

/// Another tool's file format that tracehound recognises but does not read.
pub struct Foreign {
    /// What the file is.
    pub what: &'static str,
    /// What it holds, and why that is not a trace tracehound can judge.
    pub holds: &'static str,
    /// Whether the file's first bytes (decompressed, up to 64 KiB) are this tool's.
    is: fn(&str) -> bool,
}

/// Every recognised foreign format, most specific first.
pub static KNOWN: &[Foreign] = &[
    // `--trace-config triton,file=…`: a JSON list of records, the first of each trace naming
    // its model, then `timestamps` lists of `{name, ns}` (docs/user_guide/trace.md of
    // triton-inference-server/server).
    Foreign {
        what: "a Triton Inference Server trace",
        holds: "per-request timestamps (HTTP_RECV_START, QUEUE_START, COMPUTE_START ...) and tensors, with no GPU records; for the GPU's side, profile the server with Nsight Systems (`nsys profile tritonserver ...`)",
        is: |head| {
            head.trim_start().starts_with('[')
                && head.contains("\"model_name\"")
                && (head.contains("\"timestamps\"") || head.contains("\"activity\""))
        },
    },
    // rocprofiler v1's `results.json` (`rocprof --hip-trace --hsa-trace`): process names
    // written as metadata events first (bin/sqlitedb.py `label_json`, bin/tblextr.py), then
    // complete events whose times are strings.
    Foreign {
        what: "a rocprof (ROCm profiler v1) trace",
        holds: "HIP and HSA API calls, kernels on `GPU<n>` processes and copies on a `COPY` process, in a layout of its own (times as strings, no categories); of AMD's captures tracehound reads rocmProfileData's `.rpd` database",
        is: |head| {
            head.contains("\"name\":\"CPU HIP API\"")
                || head.contains("\"name\":\"CPU HSA API\"")
                || (head.contains("\"name\":\"COPY\"") && head.contains("\"name\":\"GPU0\""))
        },
    },
    // bpftrace prints `Attaching N probes...` before the probes' own printf lines.
    Foreign {
        what: "a bpftrace log",
        holds: "lines in the format of the script's own printf calls (uprobes on the CUDA driver, say), with no schema to read GPU work from",
        is: |head| {
            head.trim_start().starts_with("Attaching ")
                && head.lines().next().is_some_and(|l| l.contains(" probe"))
        },
    },
];

/// The foreign format `head` (a file's first bytes, decompressed) belongs to, if any.
pub fn recognise(head: &[u8]) -> Option<&'static Foreign> {
    let text = String::from_utf8_lossy(&head[..head.len().min(1 << 16)]);
    KNOWN.iter().find(|f| (f.is)(&text))
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_tool_is_told_by_its_own_marks() {
        let triton = br#"[{"id":1,"model_name":"simple","model_version":1},{"id":1,"timestamps":[{"name":"QUEUE_START","ns":5}]}]"#;
        assert_eq!(
            super::recognise(triton).map(|f| f.what),
            Some("a Triton Inference Server trace")
        );
        let rocprof = br#"{ "traceEvents":[{}
,{"args":{"name":"CPU HIP API"},"ph":"M","pid":2,"name":"process_name","sort_index":0}"#;
        assert_eq!(
            super::recognise(rocprof).map(|f| f.what),
            Some("a rocprof (ROCm profiler v1) trace")
        );
        let bpf = b"Attaching 2 probes...\n12 cuLaunchKernel\n";
        assert_eq!(
            super::recognise(bpf).map(|f| f.what),
            Some("a bpftrace log")
        );
        // A profiler trace, and a list of events that merely has a model name in its args,
        // are none of them.
        assert!(super::recognise(br#"{"schemaVersion":1,"traceEvents":[]}"#).is_none());
        assert!(
            super::recognise(br#"[{"ph":"X","name":"a","args":{"model_name":"m"}}]"#).is_none()
        );
    }
}
