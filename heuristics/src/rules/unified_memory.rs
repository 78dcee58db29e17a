//! Unified (managed) memory pages migrating on demand: kernels that stall while the pages they
//! touch move in, and a host that faults pages back while the GPU waits
//! ([`crate::unified`]). Nsight Systems records the migrations when the capture traces CUDA;
//! PyTorch's profiler does not record them.

use super::Rule;
use crate::context::{Ctx, new_finding};
use crate::finding::{Confidence, Finding, fmt_bytes, fmt_ns, metrics};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "unified_memory";

/// The rule.
pub struct UnifiedMemory;

impl Rule for UnifiedMemory {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "unified (managed) memory pages migrating on demand while kernels or the host wait"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let mut out = Vec::new();
        for d in cx.trace.devices() {
            let Some(m) = crate::unified::migrations(cx, d) else {
                continue;
            };
            // Explicit copies would still move the bytes once, at the link's rate.
            let bulk_ns = crate::copy_rate::Reference::link(cx, d).map_or(0, |r| {
                ((m.htod.bytes + m.dtoh.bytes) as f64 / r.gbps) as i64
            });
            let impact = m.cost_ns - bulk_ns;
            if impact <= 0 {
                continue;
            }
            let mut f = new_finding(
                cx,
                ID,
                Some(d),
                format!(
                    "GPU {d} waits on unified-memory page migrations: {} pages moved in and {} out ({} in all); they hold {} of the kernels that faulted, and the host's page faults hold {} of idle time",
                    m.htod.count,
                    m.dtoh.count,
                    fmt_bytes(m.htod.bytes + m.dtoh.bytes),
                    fmt_ns(m.fault_stall_ns),
                    fmt_ns(m.host_fault_ns)
                ),
                impact,
                Confidence::High,
                format!(
                    "{} migrations to the device ({}, {} of migration time) and {} to the host ({}, {}); {} of {} kernels ran while pages migrated in ({}, of which the migrations and their faults hold {} at {} per fault); {} idle stretches with nothing but migrations to the host ({}), of which the host's faults hold {}: each run of them from its first migration's start to its last one's end, plus one trip to the driver, a run ending where one thread's CPU samples ({} or more) show it running code of its own between two faults; impact: what the faults hold of kernels and idle time, less {} for moving the same bytes once over the host link",
                    m.htod.count,
                    fmt_bytes(m.htod.bytes),
                    fmt_ns(m.htod.ns),
                    m.dtoh.count,
                    fmt_bytes(m.dtoh.bytes),
                    fmt_ns(m.dtoh.ns),
                    m.faulting_kernels.0,
                    m.kernels,
                    fmt_ns(m.faulting_kernels.1),
                    fmt_ns(m.fault_stall_ns),
                    fmt_ns(crate::unified::FAULT_STALL_NS),
                    m.host_fault_idle.0,
                    fmt_ns(m.host_fault_idle.1),
                    fmt_ns(m.host_fault_ns),
                    crate::unified::HOST_WORK_SAMPLES,
                    fmt_ns(bulk_ns)
                ),
            );
            if m.prefetched.count + m.prefetched_to_host.count > 0 {
                f.evidence.push_str(&format!(
                    "; besides these, the program's own prefetches (cudaMemPrefetchAsync), not faults: {} migrations in ({}) and {} out ({})",
                    m.prefetched.count,
                    fmt_bytes(m.prefetched.bytes),
                    m.prefetched_to_host.count,
                    fmt_bytes(m.prefetched_to_host.bytes)
                ));
            }
            let undone = crate::unified::prefetch_undone(&m);
            if undone {
                f.title.push_str(&format!(
                    "; {} went back to the host after the program's prefetch and before the next kernel",
                    fmt_bytes(m.after_prefetch.bytes)
                ));
                f.evidence.push_str(&format!(
                    "; after the prefetch and before the next kernel began, {} migrations ({}) went to the host on demand: the host touched managed memory in between",
                    m.after_prefetch.count,
                    fmt_bytes(m.after_prefetch.bytes)
                ));
                f.advice.push(format!(
                    "The program prefetches {} to the GPU, and {} went back to the host on demand after the prefetch and before the kernel ran: the host touched managed memory in between, and if that is the prefetched memory the kernel faults it in again (the export's virtualAddress column says which). Finish the host's writes before cudaMemPrefetchAsync (or prefetch again after them), on the stream the kernel runs on, and prefetch results back with cudaMemPrefetchAsync(ptr, bytes, cudaCpuDeviceId) before the host reads them.",
                    fmt_bytes(m.prefetched.bytes),
                    fmt_bytes(m.after_prefetch.bytes)
                ));
            }
            f.advice.extend([
                "Move the data before it is touched instead of on each fault: cudaMemPrefetchAsync(ptr, bytes, device, stream) before the kernels that use it, and to cudaCpuDeviceId before the host reads it; or keep the data in device memory (cudaMalloc) and copy only what the host reads with cudaMemcpyAsync from pinned memory.".into(),
                "For data both sides read, cudaMemAdvise(ptr, bytes, cudaMemAdviseSetReadMostly or SetPreferredLocation / SetAccessedBy, device) stops it from bouncing; a host loop that reads a result every iteration should read a reduced value, not walk the whole managed array.".into(),
            ]);
            f.metrics = metrics([
                ("migrations_htod", m.htod.count as f64),
                ("migrations_dtoh", m.dtoh.count as f64),
                ("bytes", (m.htod.bytes + m.dtoh.bytes) as f64),
                ("faulting_kernels", m.faulting_kernels.0 as f64),
                ("faulting_kernel_ns", m.faulting_kernels.1 as f64),
                ("host_fault_idle_ns", m.host_fault_idle.1 as f64),
                ("host_fault_ns", m.host_fault_ns as f64),
                ("prefetched_bytes", m.prefetched.bytes as f64),
                ("prefetched_to_host_bytes", m.prefetched_to_host.bytes as f64),
                ("after_prefetch_bytes", m.after_prefetch.bytes as f64),
            ]);
            out.push(f);
        }
        out
    }
}
