use super::*;
use crate::config::Config;
use crate::idle::analyse_device;
use crate::testutil::TB;
use tracehound_parsers::GpuOpKind::{self, Kernel};
use tracehound_parsers::{HostKind, Trace};

fn run(t: &Trace, config: &Config) -> (Vec<Finding>, DeviceIdle) {
    let cx = Ctx::new(t, config);
    (IdleGaps.check(&cx), analyse_device(&cx, 0))
}

#[test]
fn empty_trace_has_no_gaps() {
    let t = TB::new().build();
    assert!(run(&t, &Config::default()).0.is_empty());
}

#[test]
fn overlapping_streams_hide_each_others_gaps() {
    // Stream 7 idles 200-700 µs, but stream 8 runs through it: no gap.
    let t = TB::new()
        .op(Kernel, "a", 7, 0, 200_000, Some(0))
        .op(Kernel, "b", 8, 150_000, 750_000, Some(1_000))
        .op(Kernel, "c", 7, 700_000, 900_000, Some(2_000))
        .build();
    let (f, idle) = run(&t, &Config::default());
    assert!(f.is_empty());
    assert_eq!(idle.busy_ns, 900_000);
}

#[test]
fn gaps_at_window_edges_count_with_step_markers() {
    // Step 0..1000 µs; the GPU works 300-400 µs only: 300 µs idle at each edge.
    let mut b = TB::new();
    b.span(HostKind::Annotation, "ProfilerStep#0", 0, 1_000_000)
        .span(HostKind::CpuOp, "aten::slow_cpu_op", 10_000, 290_000)
        .op(Kernel, "k", 7, 300_000, 400_000, Some(295_000))
        .span(HostKind::CpuOp, "aten::tail_op", 410_000, 990_000);
    let t = b.build();
    let (f, idle) = run(&t, &Config::default());
    assert_eq!(idle.gaps.len(), 2);
    assert_eq!((idle.gaps[0].start, idle.gaps[0].end), (0, 300_000));
    // 280 of the 300 µs in an operator that launched nothing; 10 + 5 µs untraced.
    assert_eq!(idle.gaps[0].kind, CauseKind::CpuOp);
    assert_eq!(
        idle.gaps[0].label,
        "CPU operators: aten::slow_cpu_op on CPU 93%"
    );
    let total: i64 = idle.gaps[0].parts.iter().map(|p| p.ns).sum();
    assert_eq!(total, 300_000, "the parts add up to the gap");
    assert_eq!((idle.gaps[1].start, idle.gaps[1].end), (400_000, 1_000_000));
    assert!(idle.gaps[1].next_op.is_none());
    assert_eq!(f[0].impact_ns, 900_000);
    assert_eq!(f[0].severity, Severity::High);
}

#[test]
fn without_steps_the_window_starts_at_the_first_op() {
    let t = TB::new()
        .op(Kernel, "a", 7, 1_000_000, 1_100_000, None)
        .op(Kernel, "b", 7, 1_150_000, 1_200_000, None)
        .build();
    let (f, idle) = run(&t, &Config::default());
    assert!(f.is_empty(), "a 50 µs gap is under the threshold");
    assert_eq!((idle.short_count, idle.short_idle_ns), (1, 50_000));
    let (f, _) = run(
        &t,
        &Config {
            gap_threshold_ns: 10_000,
            ..Config::default()
        },
    );
    assert_eq!(f[0].impact_ns, 50_000);
    assert_eq!(f[0].instances[0].offset_ms, 0.1);
}

#[test]
fn a_sync_names_the_drain_and_the_measured_time_names_the_cause() {
    // .item() returns 5 µs after the GPU drains; then 400 µs of Python bookkeeping and
    // 84 µs nothing traced before the next launch at 590 µs.
    let mut b = TB::new();
    b.op(Kernel, "a", 7, 0, 100_000, Some(0))
        .span(HostKind::CpuOp, "aten::item", 5_000, 106_000)
        .span(HostKind::Runtime, "cudaStreamSynchronize", 6_000, 105_000)
        .span(
            HostKind::Python,
            "train.py(10): bookkeeping",
            106_000,
            506_000,
        )
        .op(Kernel, "b", 7, 600_000, 700_000, Some(590_000));
    let t = b.build();
    let (f, idle) = run(&t, &Config::default());
    assert_eq!(idle.gaps.len(), 1);
    let g = &idle.gaps[0];
    assert_eq!(g.kind, CauseKind::Python);
    assert_eq!(
        g.drained_by.as_deref(),
        Some("aten::item (cudaStreamSynchronize)")
    );
    assert_eq!(
        g.label,
        "Python: train.py(10): bookkeeping 80% — queue drained by aten::item (cudaStreamSynchronize) just before"
    );
    // The launch latency (590 -> 600 µs) and the sync itself are the sync's cost.
    let sync: i64 = g
        .parts
        .iter()
        .filter(|p| p.kind == CauseKind::HostSync)
        .map(|p| p.ns)
        .sum();
    assert_eq!(sync, 5_000 + 10_000);
    assert!(
        f[0].breakdown[0]
            .label
            .starts_with("80% Python: train.py(10): bookkeeping")
    );
    assert!(
        f[0].advice[0].contains("train.py(10): bookkeeping"),
        "{:?}",
        f[0].advice
    );
}

#[test]
fn a_sync_followed_only_by_launches_is_the_syncs_cost() {
    let mut b = TB::new();
    b.op(Kernel, "a", 7, 0, 100_000, Some(0))
        .span(HostKind::CpuOp, "aten::item", 5_000, 140_000)
        .span(HostKind::Runtime, "cudaStreamSynchronize", 6_000, 139_000)
        .op(Kernel, "b", 7, 250_000, 300_000, Some(140_000));
    let t = b.build();
    let (_, idle) = run(&t, &Config::default());
    assert_eq!(idle.gaps[0].kind, CauseKind::HostSync);
    assert!(!idle.gaps[0].mixed);
    assert!(
        idle.gaps[0]
            .label
            .starts_with("host synchronisation: aten::item (cudaStreamSynchronize)")
    );
}

#[test]
fn an_operator_that_launches_is_dispatch_and_one_that_does_not_is_cpu_work() {
    // Two gaps: in one the host sits 400 µs in aten::rand (no GPU work); in the other,
    // 150 µs in each of three operators that launch kernels (dispatch, µs each).
    let mut b = TB::new();
    b.op(Kernel, "a", 7, 0, 100_000, Some(0))
        .span(HostKind::CpuOp, "aten::rand", 100_000, 500_000)
        .op(Kernel, "b", 7, 510_000, 520_000, Some(500_000))
        .span(HostKind::CpuOp, "aten::add", 520_000, 570_000)
        .op(Kernel, "c", 7, 600_000, 610_000, Some(560_000))
        .span(HostKind::CpuOp, "aten::mul", 570_000, 620_000)
        .op(Kernel, "d", 7, 630_000, 640_000, Some(610_000))
        .span(HostKind::CpuOp, "aten::sub", 620_000, 760_000)
        .op(Kernel, "e", 7, 780_000, 800_000, Some(750_000));
    let t = b.build();
    let (_, idle) = run(&t, &Config::default());
    assert_eq!(idle.gaps.len(), 2);
    assert_eq!(idle.gaps[0].kind, CauseKind::CpuOp);
    assert!(idle.gaps[0].label.contains("aten::rand on CPU"));
    assert_eq!(idle.gaps[1].kind, CauseKind::LaunchOverhead);
}

#[test]
fn a_gap_without_a_dominant_category_is_mixed() {
    let mut b = TB::new();
    b.op(Kernel, "a", 7, 0, 100_000, Some(0))
        .span(HostKind::CpuOp, "aten::rand", 100_000, 250_000)
        .span(HostKind::Python, "train.py(3): f", 250_000, 400_000)
        .span(HostKind::OsCall, "clock_nanosleep", 400_000, 550_000)
        .op(Kernel, "b", 7, 700_000, 800_000, Some(700_000));
    let t = b.build();
    let (_, idle) = run(&t, &Config::default());
    let g = &idle.gaps[0];
    assert!(g.mixed, "{g:?}");
    assert!(g.label.starts_with("mixed: "), "{}", g.label);
}

#[test]
fn op_launched_before_the_gap_is_a_gpu_wait() {
    let t = TB::new()
        .op(Kernel, "a", 7, 0, 100_000, Some(0))
        .op(Kernel, "b", 8, 500_000, 600_000, Some(2_000))
        .build();
    let (_, idle) = run(&t, &Config::default());
    assert_eq!(idle.gaps[0].kind, CauseKind::GpuWait);
}

#[test]
fn short_gaps_between_tiny_kernels_go_to_the_launch_bound_rule() {
    // 100 kernels of 5 µs, 20 µs apart: no gap reaches 100 µs, yet the GPU idles 80%.
    let mut b = TB::new();
    for k in 0..100 {
        let t = k * 25_000;
        b.op(Kernel, "tiny", 7, t, t + 5_000, Some(t - 1_000));
    }
    let t = b.build();
    let (f, idle) = run(&t, &Config::default());
    assert!(idle.gaps.is_empty());
    assert_eq!(idle.median_kernel_ns, 5_000);
    assert!(idle.launch_bound(100 * 25_000));
    // No gap reaches the threshold: nothing for this rule, everything for launch_bound.
    assert!(f.is_empty());
    let lb = crate::testutil::check(&crate::rules::launch_bound::LaunchBound, &t);
    assert_eq!(lb.len(), 1);
    assert_eq!(lb[0].impact_ns, 99 * 20_000);
    assert_eq!(lb[0].metrics["starved_kernels"], 99.0);
    assert_eq!(lb[0].metrics["launch_latency_p50_ns"], 1_000.0);
    assert_eq!(lb[0].severity, Severity::High);
}

#[test]
fn sync_records_are_not_busy_time() {
    let t = TB::new()
        .op(Kernel, "a", 7, 0, 100_000, None)
        .op(GpuOpKind::Sync, "Stream Sync", 7, 100_000, 900_000, None)
        .op(Kernel, "b", 7, 900_000, 1_000_000, None)
        .build();
    let (f, _) = run(&t, &Config::default());
    assert_eq!(f[0].impact_ns, 800_000);
}

#[test]
fn copies_launched_onto_an_idle_gpu_wait_for_their_launch_too() {
    // Two kernels, then a Python loop of 100 copies to the host, each issued 10 µs before it
    // runs (2 µs), 28 µs after the previous one ended, with a 1 µs sync after each: no kernel
    // runs between them, and no sync destroyed a lead (the GPU had nothing else queued).
    let mut b = TB::new();
    b.op(Kernel, "k0", 7, 10_000, 15_000, Some(0))
        .op(Kernel, "k1", 7, 15_000, 21_000, Some(1_000));
    for i in 0..100 {
        let t = 100_000 + i * 40_000;
        b.op(
            GpuOpKind::Memcpy,
            "Memcpy DtoH (Device -> Pinned)",
            7,
            t,
            t + 2_000,
            Some(t - 10_000),
        )
        .bytes(8)
        .span(
            HostKind::Runtime,
            "cudaStreamSynchronize",
            t + 1_500,
            t + 2_500,
        );
    }
    let t = b.build();
    let lb = crate::testutil::check(&crate::rules::launch_bound::LaunchBound, &t);
    assert_eq!(lb.len(), 1);
    // The first copy waits 79 µs after k1; the other 99 wait 38 µs each.
    assert_eq!(lb[0].impact_ns, 79_000 + 99 * 38_000, "{}", lb[0].evidence);
    assert!(
        lb[0]
            .title
            .starts_with("GPU 0 waits for copy and memset launches"),
        "{}",
        lb[0].title
    );
    assert!(
        lb[0]
            .evidence
            .starts_with("0 of 2 kernels and 100 of 100 copies and memsets started after a gap"),
        "{}",
        lb[0].evidence
    );
}

#[test]
fn one_kernel_then_a_loop_of_copies_is_judged_and_a_drained_copy_is_the_syncs() {
    // One kernel makes x, then 50 copies of x[i] to the host, each issued 10 µs before it runs,
    // 38 µs after the previous one ended: they wait for their launch.
    let mut b = TB::new();
    b.op(Kernel, "randn", 7, 10_000, 60_000, Some(0));
    for i in 0..50 {
        let t = 100_000 + i * 40_000;
        b.op(
            GpuOpKind::Memcpy,
            "Memcpy DtoH (Device -> Pinned)",
            7,
            t,
            t + 2_000,
            Some(t - 10_000),
        )
        .bytes(8);
    }
    let t = b.build();
    let lb = crate::testutil::check(&crate::rules::launch_bound::LaunchBound, &t);
    assert_eq!(lb.len(), 1);
    assert_eq!(lb[0].impact_ns, 40_000 + 49 * 38_000, "{}", lb[0].evidence);
    assert_eq!(lb[0].metrics["starved_copies"], 50.0);
    assert_eq!(lb[0].metrics["starved_kernels"], 0.0);

    // A sync that waited 400 µs behind a long kernel drains the queue; the copy the host
    // issues 30 µs later is the sync's (its wait covers the gap), not a launch wait.
    let mut b = TB::new();
    b.op(Kernel, "a", 7, 0, 400_000, Some(0))
        .op(Kernel, "b", 7, 400_000, 405_000, Some(1_000))
        .span(HostKind::Runtime, "cudaStreamSynchronize", 5_000, 406_000)
        .op(
            GpuOpKind::Memcpy,
            "Memcpy HtoD (Pinned -> Device)",
            7,
            435_000,
            437_000,
            Some(425_000),
        );
    let t = b.build();
    let config = Config::default();
    let cx = Ctx::new(&t, &config);
    let dev = &cx.starved()[0];
    assert_eq!(dev.drained().count(), 1);
    assert_eq!(dev.launch_bound().count(), 0);
}
