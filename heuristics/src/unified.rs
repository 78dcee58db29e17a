//! Unified (managed) memory migrations and what they cost. Nsight Systems records each page
//! migration CUPTI saw as a copy of a unified-memory kind (the nsys reader marks them managed
//! on both sides, [`tracehound_parsers::GpuOp::is_migration`]). Two costs show in the
//! timeline:
//!
//! - a kernel that touches pages resident on the host stalls while they migrate in: migrations
//!   to the device that start while one of the device's kernels runs are its faults, and the
//!   kernel waits on each;
//! - the host touching pages resident on the device faults them back: migrations to the host
//!   that run while the device has no other work are the host's faults, and the idle time
//!   they pace is theirs.
//!
//! The cost is what the faults hold of the faulting kernels — each migration's own time plus
//! [`FAULT_STALL_NS`], at most the kernel's time (a slow kernel that also faults is not all
//! fault) — plus what the host's faults hold of the idle stretches they fall in
//! ([`host_fault_ns`]): what moving the data explicitly (or prefetching it) would take off the
//! timeline, before the bulk copies that replace the migrations. An idle stretch is not the
//! faults' as a whole: a host that prints for 100 ms and faults a few pages on the way has
//! spent 100 ms printing, which its CPU samples show.

use crate::scope::Scope;
use tracehound_parsers::nsys::PREFETCH_NAME_TAIL;
use tracehound_parsers::{CopyDirection, CpuSample, GpuOpKind, MemKind};

/// What one migration on demand stalls a kernel beyond the copy itself: the fault's trip to
/// the driver and back. Measured on our H200 capture (`h200_v40_um_managed`): 12 kernels that
/// take 0.3 ms on device memory took 67 ms each with 5,658 migrations apiece, 11.8 µs per
/// migration of which 3.1 µs was the copy.
pub const FAULT_STALL_NS: i64 = 8_000;

/// CPU samples of one thread between two of the host's faults from which the host ran code of
/// its own there rather than wait on faults. A thread serving a fault is sampled at the
/// instruction that faulted, and the service begins before the migration the trace records,
/// so one sample just before a migration may be its fault; with three, the host ran at least
/// two sampling periods (2 ms at nsys's default 1 kHz) without faulting.
pub const HOST_WORK_SAMPLES: usize = 3;

/// One direction of migrations: count, bytes, GPU time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moved {
    /// Migrations.
    pub count: u64,
    /// Bytes.
    pub bytes: u64,
    /// Their time on the GPU, ns (summed, they overlap each other).
    pub ns: i64,
}

/// The unified-memory migrations of one device in the window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Migrations {
    /// Device index.
    pub device: i32,
    /// To the device on demand (kernel page faults, the driver's speculative prefetches);
    /// the program's own prefetches are in `prefetched`.
    pub htod: Moved,
    /// To the host on demand (host page faults); the program's own prefetches back are left
    /// out.
    pub dtoh: Moved,
    /// Kernels during which pages migrated in, and their time, ns.
    pub faulting_kernels: (u64, i64),
    /// What the migrations held of those kernels, ns.
    pub fault_stall_ns: i64,
    /// All kernels of the device in the window.
    pub kernels: u64,
    /// Idle time of the device (no kernel, copy or memset beside the migrations) in
    /// stretches where pages migrated to the host, ns, and how many stretches.
    pub host_fault_idle: (u64, i64),
    /// What the host's faults hold of that idle time, ns ([`host_fault_ns`]).
    pub host_fault_ns: i64,
    /// The cost: what the faults hold of the faulting kernels and of the idle time, ns.
    pub cost_ns: i64,
    /// Of the migrations to the device, those the program asked for (`cudaMemPrefetchAsync`,
    /// recorded by nsys as the user's), which are not faults.
    pub prefetched: Moved,
    /// Of the migrations to the host, those the program asked for (`cudaMemPrefetchAsync` to
    /// `cudaCpuDeviceId`), which are not faults either.
    pub prefetched_to_host: Moved,
    /// Migrations to the host on demand after a prefetch to the device and before the next
    /// kernel began: the host touched managed memory in between, and what the prefetch moved
    /// may have gone back.
    pub after_prefetch: Moved,
}

/// Whether at least half of what the program prefetched to the device went back to the host
/// on demand before the next kernel: the prefetch was undone by the host touching the memory.
pub fn prefetch_undone(m: &Migrations) -> bool {
    m.prefetched.bytes > 0 && 2 * m.after_prefetch.bytes >= m.prefetched.bytes
}

/// The migrations of `device` in the window, or `None` when it has none.
pub fn migrations(cx: &Scope, device: i32) -> Option<Migrations> {
    let t = cx.trace;
    let w = &cx.window;
    // The nsys reader names migrations by their kinds: a trace without those names has none,
    // and its GPU operations need not be walked.
    let name = |dir: CopyDirection, tail: &str| {
        t.strings.lookup(&format!(
            "Memcpy {} ({} -> {}{tail})",
            dir.label(),
            MemKind::Managed.label(),
            MemKind::Managed.label()
        ))
    };
    let prefetch_names = [
        name(CopyDirection::HtoD, PREFETCH_NAME_TAIL),
        name(CopyDirection::DtoH, PREFETCH_NAME_TAIL),
    ];
    if name(CopyDirection::HtoD, "").is_none()
        && name(CopyDirection::DtoH, "").is_none()
        && prefetch_names.iter().all(Option::is_none)
    {
        return None;
    }
    let mut m = Migrations {
        device,
        ..Default::default()
    };
    // Work other than migrations, as (start, end), and migrations to each side.
    let mut work: Vec<(i64, i64, bool)> = Vec::new();
    let mut to_device: Vec<(i64, i64)> = Vec::new();
    // Migrations to the host on demand: start, end, bytes.
    let mut to_host: Vec<(i64, i64, u64)> = Vec::new();
    let mut prefetch_ends: Vec<i64> = Vec::new();
    for &i in t.device_ops(device) {
        let op = &t.gpu_ops[i as usize];
        if !op.is_work() || op.start < w.start || op.start >= w.end {
            continue;
        }
        if op.is_migration() {
            // The program's own prefetches are copies it asked for, not faults: counted apart,
            // and neither a kernel's stall nor the host's fault.
            if prefetch_names.contains(&Some(op.name)) {
                let side = match op.direction {
                    CopyDirection::HtoD => {
                        prefetch_ends.push(op.end);
                        &mut m.prefetched
                    }
                    CopyDirection::DtoH => &mut m.prefetched_to_host,
                    _ => continue,
                };
                side.count += 1;
                side.bytes += op.bytes;
                side.ns += op.dur();
                continue;
            }
            let side = match op.direction {
                CopyDirection::HtoD => {
                    to_device.push((op.start, op.dur()));
                    &mut m.htod
                }
                CopyDirection::DtoH => {
                    to_host.push((op.start, op.end, op.bytes));
                    &mut m.dtoh
                }
                _ => continue,
            };
            side.count += 1;
            side.bytes += op.bytes;
            side.ns += op.dur();
            continue;
        }
        let kernel = op.kind == GpuOpKind::Kernel;
        m.kernels += u64::from(kernel);
        work.push((op.start, op.end, kernel));
    }
    if m.htod.count + m.dtoh.count + m.prefetched.count + m.prefetched_to_host.count == 0 {
        return None;
    }
    // Kernels in start order (the device's ops are): a migration in starts inside the last
    // kernel begun by then, or none.
    let kernels: Vec<(i64, i64)> = work.iter().filter(|x| x.2).map(|x| (x.0, x.1)).collect();
    // Per kernel, what its migrations hold: (migrations, their time plus the stall).
    let mut held = vec![(0u64, 0i64); kernels.len()];
    let mut k = 0usize;
    for &(s, dur) in &to_device {
        while k < kernels.len() && kernels[k].0 <= s {
            k += 1;
        }
        if let Some(j) = k.checked_sub(1)
            && kernels[j].1 > s
        {
            held[j].0 += 1;
            held[j].1 += dur + FAULT_STALL_NS;
        }
    }
    for (j, &(a, b)) in kernels.iter().enumerate() {
        if held[j].0 > 0 {
            m.faulting_kernels.0 += 1;
            m.faulting_kernels.1 += b - a;
            m.fault_stall_ns += held[j].1.min(b - a);
        }
    }
    // Idle stretches between the other work (merged), each counted once when a migration to
    // the host overlaps it.
    let mut busy: Vec<(i64, i64)> = Vec::new();
    for &(a, b, _) in &work {
        match busy.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => busy.push((a, b)),
        }
    }
    let mut gaps: Vec<(i64, i64)> = Vec::new();
    let mut from = w.start;
    for &(a, b) in &busy {
        if a > from {
            gaps.push((from, a));
        }
        from = from.max(b);
    }
    if w.end > from {
        gaps.push((from, w.end));
    }
    let threads: Vec<&[CpuSample]> = t
        .cpu_samples
        .chunk_by(|x, y| (x.pid, x.tid) == (y.pid, y.tid))
        .collect();
    let mut h = 0usize;
    for &(a, b) in &gaps {
        while h < to_host.len() && to_host[h].1 <= a {
            h += 1;
        }
        if h < to_host.len() && to_host[h].0 < b {
            m.host_fault_idle.0 += 1;
            m.host_fault_idle.1 += b - a;
            let inside = to_host[h..]
                .iter()
                .take_while(|x| x.0 < b)
                .filter(|x| x.1 > a)
                .map(|x| (x.0.max(a), x.1.min(b)));
            m.host_fault_ns += host_fault_ns(inside, &threads).min(b - a);
        }
    }
    m.cost_ns = m.fault_stall_ns + m.host_fault_ns;
    // From the earliest prefetch end before a kernel to that kernel's start: spans in time
    // order, disjoint (a later prefetch before the same kernel shares its span).
    prefetch_ends.sort_unstable();
    let mut spans: Vec<(i64, i64)> = Vec::new();
    for &e in &prefetch_ends {
        let next_kernel = kernels
            .get(kernels.partition_point(|k| k.0 < e))
            .map_or(w.end, |k| k.0);
        match spans.last_mut() {
            Some(last) if last.1 == next_kernel => {}
            _ => spans.push((e, next_kernel)),
        }
    }
    for &(start, end, bytes) in &to_host {
        let k = spans.partition_point(|s| s.1 <= start);
        if spans.get(k).is_some_and(|s| s.0 <= start) {
            m.after_prefetch.count += 1;
            m.after_prefetch.bytes += bytes;
            m.after_prefetch.ns += end - start;
        }
    }
    Some(m)
}

/// What the host's faults hold of an idle stretch, given the migrations to the host in it
/// (start, end, in start order) and the CPU samples of each thread (in time order). The host
/// waits on a fault from its trip to the driver ([`FAULT_STALL_NS`]) to the migration's end;
/// between two faults it either serves the next one or runs code of its own, which only CPU
/// samples tell apart. So the faults hold each run of migrations from its first start to its
/// last end, plus one trip, where a run ends at a stretch in which some thread was sampled
/// [`HOST_WORK_SAMPLES`] times: what the host did there, its samples say, and it was not
/// faulting. Without samples nothing else explains the time between faults and a stretch's
/// faults make one run; the time before the first fault and after the last is never theirs.
pub fn host_fault_ns(
    migrations: impl IntoIterator<Item = (i64, i64)>,
    threads: &[&[CpuSample]],
) -> i64 {
    let host_worked = |from: i64, to: i64| {
        from < to
            && threads.iter().any(|th| {
                let i = th.partition_point(|s| s.ts <= from);
                let j = th.partition_point(|s| s.ts < to);
                j.saturating_sub(i) >= HOST_WORK_SAMPLES
            })
    };
    let mut held = 0i64;
    let mut run: Option<(i64, i64)> = None;
    for (s, e) in migrations {
        match &mut run {
            Some(r) if !host_worked(r.1, s) => r.1 = r.1.max(e),
            _ => {
                if let Some(r) = run.replace((s, e)) {
                    held += r.1 - r.0 + FAULT_STALL_NS;
                }
            }
        }
    }
    held + run.map_or(0, |r| r.1 - r.0 + FAULT_STALL_NS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::context::Ctx;
    use crate::testutil::TB;
    use tracehound_parsers::Trace;

    const US: i64 = 1_000;

    fn sample(t: &mut Trace, tid: i64, ts: i64) -> CpuSample {
        let name = t.strings.intern("printf");
        CpuSample {
            pid: 1,
            tid,
            ts,
            symbol: name,
            module: name,
        }
    }

    #[test]
    fn faults_make_one_run_until_samples_show_the_host_working() {
        let mut t = Trace::default();
        let moves = [(0, 10 * US), (100 * US, 110 * US), (5_000 * US, 5_010 * US)];
        // Nothing explains the time between faults: one run, first start to last end.
        assert_eq!(host_fault_ns(moves, &[]), 5_010 * US + FAULT_STALL_NS);
        // Two samples between faults may be the next fault's service: still one run.
        let two: Vec<CpuSample> = [1_000, 2_000].map(|us| sample(&mut t, 1, us * US)).into();
        assert_eq!(host_fault_ns(moves, &[&two]), 5_010 * US + FAULT_STALL_NS);
        // Three show the host running its own code: the run ends there.
        let three: Vec<CpuSample> = [1_000, 2_000, 3_000]
            .map(|us| sample(&mut t, 1, us * US))
            .into();
        assert_eq!(
            host_fault_ns(moves, &[&three]),
            110 * US + FAULT_STALL_NS + 10 * US + FAULT_STALL_NS
        );
        // Three samples spread over threads are no thread's work.
        let (a, b) = (three[..2].to_vec(), vec![sample(&mut t, 2, 3_000 * US)]);
        assert_eq!(host_fault_ns(moves, &[&a, &b]), 5_010 * US + FAULT_STALL_NS);
    }

    #[test]
    fn a_host_busy_between_faults_holds_the_idle_time_not_the_faults() {
        let mut tb = TB::new();
        tb.op(GpuOpKind::Kernel, "k", 7, 0, 100 * US, None);
        tb.op(
            GpuOpKind::Memcpy,
            "Memcpy DtoH (Managed -> Managed)",
            7,
            200 * US,
            210 * US,
            None,
        )
        .bytes(4096);
        tb.op(
            GpuOpKind::Memcpy,
            "Memcpy DtoH (Managed -> Managed)",
            7,
            20_000 * US,
            20_020 * US,
            None,
        )
        .bytes(65_536);
        tb.op(
            GpuOpKind::Memcpy,
            "Memcpy DtoH (Managed -> Managed, prefetch)",
            7,
            30_000 * US,
            31_000 * US,
            None,
        )
        .bytes(1 << 20);
        let prefetch = tb.t.gpu_ops.last_mut().expect("the prefetch");
        (prefetch.src_kind, prefetch.dst_kind) = (MemKind::Managed, MemKind::Managed);
        tb.op(GpuOpKind::Kernel, "k", 7, 40_000 * US, 40_100 * US, None);
        // The host prints between the two faults, sampled every millisecond.
        let samples: Vec<CpuSample> = (1..20)
            .map(|ms| sample(&mut tb.t, 1, ms * 1_000 * US))
            .collect();
        tb.t.cpu_samples = samples;
        let t = tb.build();
        let config = Config::default();
        let cx = Ctx::new(&t, &config);
        let m = migrations(&cx, 0).expect("migrations");
        assert_eq!(m.host_fault_idle, (1, 39_900 * US));
        assert_eq!(m.host_fault_ns, 10 * US + 20 * US + 2 * FAULT_STALL_NS);
        assert_eq!(m.cost_ns, m.host_fault_ns);
        assert_eq!((m.dtoh.count, m.dtoh.bytes), (2, 4096 + 65_536));
        assert_eq!(
            (m.prefetched_to_host.count, m.prefetched_to_host.bytes),
            (1, 1 << 20)
        );
        assert_eq!(m.prefetched.count, 0);
    }
}
