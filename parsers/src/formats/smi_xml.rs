//! `nvidia-smi -q -x` XML (DTD v10 to v13, or none) into the GPU inventory.
//!
//! Every element is optional (trimmed test fixtures exist); values carry units (`65 %`,
//! `35.15 W`, `1275 MHz`, `16x`) or `N/A`, which is missing. Power moved from
//! `power_readings` to `gpu_power_readings` (v12+) and throttle reasons from
//! `clocks_throttle_reasons/clocks_throttle_reason_*` to `clocks_event_reasons/clocks_event_reason_*`;
//! both spellings are read. The DTD is never fetched and entities are not expanded.

use crate::error::LoadError;
use crate::model::*;
use quick_xml::Reader;
use quick_xml::events::Event;

/// The format.
pub static FORMAT: SourceFormat = SourceFormat {
    id: "smi_xml",
    name: "nvidia-smi -q -x XML",
    input: "XML",
    records: "GPUs",
    records_gpu_work: false,
    clock_origin: None,
};

/// The reader: a small text file read whole.
pub static READER: super::Reader = super::Reader {
    format: &FORMAT,
    is_applicable,
    input: super::Input::Text(|data, source, _| read(data, source)),
};

/// Does `head` look like nvidia-smi XML?
pub fn is_applicable(head: &[u8]) -> Option<bool> {
    let text = String::from_utf8_lossy(head);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    if t.is_empty() {
        return None;
    }
    if !t.starts_with('<') {
        return Some(false);
    }
    // Any XML goes to this reader, which names the root it found when it is not nvidia-smi's.
    Some(true)
}

fn number(v: &str) -> Option<f64> {
    v.split_whitespace()
        .next()?
        .trim_end_matches('x')
        .parse()
        .ok()
}

fn set(inv: &mut GpuInventory, path: &str, v: &str) {
    let v = v.trim();
    if v.is_empty()
        || v.starts_with("N/A")
        || v.starts_with("[N/A]")
        || v.starts_with("Not ") && !v.starts_with("Not Active")
    {
        return;
    }
    let n = || number(v);
    let u = || number(v).map(|x| x as u32);
    match path {
        "product_name" => inv.product = v.to_string(),
        "product_architecture" => inv.architecture = Some(v.to_string()),
        "performance_state" => inv.pstate = Some(v.to_string()),
        "pci/pci_bus_id" => inv.bus_id = v.to_string(),
        "utilization/gpu_util" => inv.gpu_util_pct = n(),
        "pci/pci_gpu_link_info/pcie_gen/current_link_gen" => inv.pcie_gen.0 = u(),
        "pci/pci_gpu_link_info/pcie_gen/max_link_gen" => inv.pcie_gen.1 = u(),
        "pci/pci_gpu_link_info/link_widths/current_link_width" => inv.pcie_width.0 = u(),
        "pci/pci_gpu_link_info/link_widths/max_link_width" => inv.pcie_width.1 = u(),
        "clocks/sm_clock" => inv.sm_clock_mhz.0 = n(),
        "max_clocks/sm_clock" => inv.sm_clock_mhz.1 = n(),
        "clocks/mem_clock" => inv.mem_clock_mhz.0 = n(),
        "max_clocks/mem_clock" => inv.mem_clock_mhz.1 = n(),
        "power_readings/power_draw"
        | "gpu_power_readings/power_draw"
        | "gpu_power_readings/instant_power_draw" => inv.power_w.0 = n(),
        "gpu_power_readings/average_power_draw" if inv.power_w.0.is_none() => inv.power_w.0 = n(),
        "power_readings/enforced_power_limit"
        | "gpu_power_readings/enforced_power_limit"
        | "gpu_power_readings/current_power_limit" => inv.power_w.1 = n(),
        "power_readings/power_limit" if inv.power_w.1.is_none() => inv.power_w.1 = n(),
        "temperature/gpu_temp" => inv.temp_c = n(),
        "fb_memory_usage/used" => inv.fb_mib.0 = n(),
        "fb_memory_usage/total" => inv.fb_mib.1 = n(),
        "mig_mode/current_mig" => inv.mig = Some(v.eq_ignore_ascii_case("enabled")),
        "processes/process_info/pid" => inv.processes += 1,
        "retired_pages/multiple_single_bit_retirement/retired_count"
        | "retired_pages/double_bit_retirement/retired_count" => {
            if let Some(c) = n() {
                *inv.retired_pages.get_or_insert(0) += c as u64;
            }
        }
        _ => {
            if let Some(reason) = path
                .strip_prefix("clocks_event_reasons/clocks_event_reason_")
                .or_else(|| path.strip_prefix("clocks_throttle_reasons/clocks_throttle_reason_"))
            {
                if v == "Active" {
                    inv.throttle_reasons.push(reason.to_string());
                }
            } else if let Some(rest) = path.strip_prefix("ecc_errors/volatile/")
                && let Some(x) = n()
            {
                let x = x as u64;
                let uncorrectable = rest.contains("uncorrectable") || rest.contains("double_bit");
                let single = rest.contains("correctable") || rest.contains("single_bit");
                // Old DTDs nest counts under single_bit/... and double_bit/...: take their totals.
                if rest.contains('/') && !rest.ends_with("/total") {
                    return;
                }
                if uncorrectable {
                    *inv.ecc_volatile.1.get_or_insert(0) += x;
                } else if single {
                    *inv.ecc_volatile.0.get_or_insert(0) += x;
                }
            }
        }
    }
}

/// Parses an `nvidia-smi -q -x` file.
pub fn parse(data: &[u8], source: &str) -> Result<Trace, LoadError> {
    read(data, source).map(Parsed::finish)
}

/// [`parse`], before the trace is finished.
pub fn read(data: &[u8], source: &str) -> Result<Parsed, LoadError> {
    let mut reader = Reader::from_reader(data);
    reader.config_mut().trim_text(true);
    let mut stack: Vec<String> = Vec::new();
    let mut gpus: Vec<GpuInventory> = Vec::new();
    let mut driver = None;
    let mut cuda = None;
    let mut saw_root = false;
    let mut buf = Vec::new();
    loop {
        let ev = reader
            .read_event_into(&mut buf)
            .map_err(|e| LoadError::NotATrace {
                path: source.to_string(),
                why: format!("invalid XML at byte {}: {e}", reader.error_position()),
            })?;
        match ev {
            Event::Start(e) => {
                let name = e.name().as_ref().to_string();
                if stack.is_empty() {
                    if name != "nvidia_smi_log" {
                        return Err(LoadError::NotATrace {
                            path: source.to_string(),
                            why: format!(
                                "XML whose root is <{name}>, not nvidia-smi's <nvidia_smi_log>"
                            ),
                        });
                    }
                    saw_root = true;
                }
                if stack.len() == 1 && name == "gpu" {
                    let mut inv = GpuInventory::default();
                    for a in e.attributes().flatten() {
                        if a.key.as_ref() == "id" {
                            inv.bus_id = a.value.to_string();
                        }
                    }
                    gpus.push(inv);
                }
                stack.push(name);
            }
            Event::End(_) => {
                stack.pop();
            }
            Event::Text(t) => {
                let v = t.as_ref().to_string();
                if stack.len() == 2 && stack[1] == "driver_version" {
                    driver = Some(v);
                } else if stack.len() == 2 && stack[1] == "cuda_version" {
                    cuda = Some(v);
                } else if stack.len() >= 3
                    && stack[1] == "gpu"
                    && let Some(inv) = gpus.last_mut()
                {
                    set(inv, &stack[2..].join("/"), &v);
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !saw_root {
        return Err(LoadError::NotATrace {
            path: source.to_string(),
            why: "XML without nvidia-smi's <nvidia_smi_log> root".into(),
        });
    }
    for g in &mut gpus {
        g.driver = driver.clone();
        g.cuda = cuda.clone();
    }
    let mut trace = Trace {
        source: source.to_string(),
        ..Default::default()
    };
    trace.strings.intern("");
    trace.meta.format = Some(&FORMAT);
    trace.meta.stack.driver = driver.clone();
    trace.meta.stack.driver_cuda = cuda.as_deref().and_then(|c| {
        let (a, b) = c.trim().split_once('.')?;
        Some(a.parse::<u32>().ok()? * 1000 + b.parse::<u32>().ok()? * 10)
    });
    trace.meta.stack.mig = gpus.iter().filter_map(|g| g.mig).reduce(|a, b| a || b);
    trace.meta.format_version = match &driver {
        Some(d) => format!("driver {d}"),
        None => "no driver version".into(),
    };
    trace.meta.gpus = gpus
        .iter()
        .enumerate()
        .map(|(k, g)| GpuInfo {
            id: k as i32,
            name: g.product.clone(),
            compute_capability: None,
            sm_count: None,
            memory_bytes: g.fb_mib.1.map(|m| (m * 1_048_576.0) as u64),
        })
        .collect();
    trace.stats.events_total = gpus.len() as u64;
    trace.stats.bytes_total = data.len() as u64;
    trace.stats.bytes_parsed = data.len() as u64;
    if gpus.is_empty() {
        trace
            .warnings
            .push("no <gpu> element: the file lists no GPU".into());
    }
    // Elements still open at the end: the file was cut short (a snapshot copied while being
    // written); what it has is read, and it says so.
    if !stack.is_empty() {
        trace.stats.truncated = true;
        trace.stats.incomplete = Some(crate::Incomplete {
            why: format!("the XML ends inside <{}>", stack.join("><")),
            compressed: false,
            file_bytes: data.len() as u64,
            file_bytes_read: data.len() as u64,
            text_bytes_complete: data.len() as u64,
            events_read: trace.stats.events_total,
        });
    }
    trace.inventory = gpus;
    Ok(Parsed::events_only(trace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_and_new_spellings() {
        let xml = r#"<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log><driver_version>525.1</driver_version>
<gpu id="00000000:01:00.0"><product_name>X</product_name>
<pci><pci_gpu_link_info><pcie_gen><max_link_gen>4</max_link_gen><current_link_gen>1</current_link_gen></pcie_gen>
<link_widths><max_link_width>16x</max_link_width><current_link_width>8x</current_link_width></link_widths></pci_gpu_link_info></pci>
<clocks_throttle_reasons><clocks_throttle_reason_sw_power_cap>Active</clocks_throttle_reason_sw_power_cap><clocks_throttle_reason_gpu_idle>Not Active</clocks_throttle_reason_gpu_idle></clocks_throttle_reasons>
<power_readings><power_draw>N/A</power_draw><enforced_power_limit>70.00 W</enforced_power_limit></power_readings>
<ecc_errors><volatile><single_bit><total>3</total></single_bit><double_bit><total>1</total></double_bit></volatile></ecc_errors>
</gpu></nvidia_smi_log>"#;
        let t = parse(xml.as_bytes(), "x.xml").unwrap();
        let g = &t.inventory[0];
        assert_eq!(
            (g.pcie_gen, g.pcie_width),
            ((Some(1), Some(4)), (Some(8), Some(16)))
        );
        assert_eq!(g.throttle_reasons, vec!["sw_power_cap".to_string()]);
        assert_eq!(g.power_w, (None, Some(70.0)));
        assert_eq!(g.ecc_volatile, (Some(3), Some(1)));
        assert_eq!(g.driver.as_deref(), Some("525.1"));
    }

    #[test]
    fn other_xml_is_rejected() {
        assert!(parse(b"<html><body/></html>", "x.xml").is_err());
        assert!(parse(b"<nvidia_smi_log><gpu", "x.xml").is_err());
    }
}
