//! Every nvidia-smi log and XML of the shared set loads, with values equal to what Python's
//! csv / xml.etree read from the same files when the test was written. Skips when `../shared`
//! is absent.

use std::path::PathBuf;
use tracehound_parsers::{CounterClock, LoadOptions, load, load_with};

fn dir(sub: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../../shared/sample-traces")
    .join(sub)
}

/// (file, sample lines, GPUs, sm samples, sum of sm %)
const DMON: &[(&str, u64, usize, usize, f64)] = &[
    ("fullbot_dmon_s_u_jpg_ofa.log", 10, 1, 10, 370.0),
    ("h200_dmon_default.log", 74, 1, 74, 220.0),
    ("h200_dmon_s_pucvmet_o_DT.log", 71, 1, 71, 403.0),
    ("h200_dmon_s_pucvmet_o_DT_gpu_bound.log", 22, 1, 22, 0.0),
    ("xuesongtap_dmon_mutc_TD_blankline.log", 6, 1, 6, 25.0),
];

/// (file, GPUs, first product name)
const XML: &[(&str, usize, &str)] = &[
    ("h200_nvidia_smi_q.xml", 1, "NVIDIA H200"),
    ("telegraf_3090_v13.xml", 1, "NVIDIA GeForce RTX 3090"),
    ("telegraf_a100_sxm4_v12.xml", 1, "NVIDIA A100-SXM4-80GB"),
    ("telegraf_a10g.xml", 1, "NVIDIA A10G"),
    ("telegraf_dual_2070_v13.xml", 2, "NVIDIA GeForce RTX 2070"),
    ("telegraf_dual_2080_v13.xml", 2, "NVIDIA GeForce RTX 2080"),
    ("telegraf_gtx_1070_ti.xml", 1, "GeForce GTX 1070 Ti"),
    ("telegraf_gtx_1660_ti.xml", 1, "Graphics Device"),
    (
        "telegraf_pro_6000_maxq_blackwell_v13.xml",
        1,
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    ),
    ("telegraf_quadro_p2000_v12.xml", 1, "Quadro P2000"),
    ("telegraf_quadro_p400.xml", 1, "Quadro P400"),
    ("telegraf_rtx_3060_v12.xml", 1, "NVIDIA GeForce RTX 3060"),
    (
        "telegraf_rtx_3080_v12_3566d568.xml",
        1,
        "NVIDIA GeForce RTX 3080",
    ),
    (
        "telegraf_rtx_3080_v12_e427481c.xml",
        1,
        "NVIDIA GeForce RTX 3080",
    ),
    ("telegraf_rtx_3080_v13.xml", 1, "NVIDIA GeForce RTX 3080"),
    ("telegraf_rtx_3090_v12.xml", 1, "NVIDIA GeForce RTX 3090"),
    (
        "telegraf_rtx_4000_sff_ada_v13.xml",
        1,
        "NVIDIA RTX 4000 SFF Ada Generation",
    ),
    ("telegraf_tesla_t4_3a4e962c.xml", 1, "Tesla T4"),
    ("telegraf_tesla_t4_78de605e.xml", 1, "Tesla T4"),
];

#[test]
fn dmon_logs_by_header() {
    if !dir("dmon").exists() {
        eprintln!("skipping: ../shared is absent");
        return;
    }
    for &(name, rows, gpus, sm_n, sm_sum) in DMON {
        let t = load(&dir("dmon").join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(t.meta.format.map(|f| f.id), Some("dmon"), "{name}");
        assert_eq!(t.stats.events_total, rows, "{name}");
        let mut g: Vec<i32> = t.counters.iter().map(|c| c.gpu).collect();
        g.dedup();
        assert_eq!(g.len(), gpus, "{name}");
        let sm = t.counters.iter().find(|c| c.metric == "sm").unwrap();
        assert_eq!(sm.samples.len(), sm_n, "{name}");
        assert_eq!(
            sm.samples.iter().map(|s| s.1).sum::<f64>(),
            sm_sum,
            "{name}"
        );
        assert!(t.warnings.is_empty(), "{name}: {:?}", t.warnings);
    }
    // -o DT: wall time, the first H200 sample at 2026-11-29 16:35:23 UTC.
    let t = load(&dir("dmon").join("h200_dmon_s_pucvmet_o_DT.log")).unwrap();
    assert_eq!(
        t.counter_clock,
        Some(CounterClock::Wall { utc_offset_s: 0 })
    );
    assert_eq!(t.counters[0].samples[0].0, 1_795_970_123_000_000_000);
    let shifted = load_with(
        &dir("dmon").join("h200_dmon_s_pucvmet_o_DT.log"),
        LoadOptions {
            utc_offset_s: Some(3600),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        shifted.counters[0].samples[0].0,
        1_795_970_123_000_000_000 - 3_600_000_000_000
    );
    let plain = load(&dir("dmon").join("h200_dmon_default.log")).unwrap();
    assert!(matches!(
        plain.counter_clock,
        Some(CounterClock::Relative { .. })
    ));
}

#[test]
fn query_gpu_csv() {
    let p = dir("dmon").join("h200_smi_query_gpu.csv");
    if !p.exists() {
        return;
    }
    let t = load(&p).unwrap();
    assert_eq!(t.meta.format.map(|f| f.id), Some("smi_query"));
    // Python csv: 74 rows, utilization.gpu summing to 231 %.
    assert_eq!(t.stats.events_total, 74);
    let sm = t.counters.iter().find(|c| c.metric == "sm").unwrap();
    assert_eq!(sm.samples.iter().map(|s| s.1).sum::<f64>(), 231.0);
    let link = t.counters.iter().find(|c| c.metric == "pcie_gen").unwrap();
    assert_eq!(link.samples[0].1, 5.0);
}

#[test]
fn smi_xml_inventory() {
    if !dir("smi-xml").exists() {
        return;
    }
    for &(name, gpus, product) in XML {
        let t = load(&dir("smi-xml").join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(t.meta.format.map(|f| f.id), Some("smi_xml"), "{name}");
        assert_eq!(t.inventory.len(), gpus, "{name}");
        assert_eq!(t.inventory[0].product, product, "{name}");
    }
    assert_eq!(
        std::fs::read_dir(dir("smi-xml")).unwrap().count(),
        XML.len()
    );
    let h = load(&dir("smi-xml").join("h200_nvidia_smi_q.xml")).unwrap();
    let g = &h.inventory[0];
    assert_eq!(g.pcie_gen, (Some(5), Some(5)));
    assert_eq!(g.pcie_width, (Some(16), Some(16)));
    assert_eq!(g.power_w.1, Some(700.0));
    assert_eq!(g.sm_clock_mhz.1, Some(1980.0));
    assert_eq!(g.architecture.as_deref(), Some("Hopper"));
    assert_eq!(g.ecc_volatile, (Some(0), Some(0)));
    // Old DTD (v11): throttle reasons under clocks_throttle_reasons, power under power_readings.
    let t4 = load(&dir("smi-xml").join("telegraf_tesla_t4_3a4e962c.xml")).unwrap();
    assert_eq!(t4.inventory[0].power_w, (Some(26.78), Some(70.0)));
    assert_eq!(t4.inventory[0].pcie_gen, (Some(3), Some(3)));
}
