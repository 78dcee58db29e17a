//! The rate pinned host<->device copies reach on the machine a trace was captured on: taken
//! from the capture first (its own pinned copies), then from the hardware (an
//! `nvidia-smi -q -x` snapshot's host link, else the GPU model's datasheet link), else an
//! assumed figure said as assumed. The pageable-copy and unified-memory rules measure what
//! moving data costs against it.

use crate::context::Ctx;
use crate::hardware::{HostLink, model_link};
use tracehound_parsers::CopyDirection;

/// Where a reference rate for pinned copies came from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Pinned copies of the same direction in this trace.
    Measured = 0,
    /// The host link in an `nvidia-smi -q -x` snapshot loaded with the trace.
    Snapshot = 1,
    /// The host link the GPU model ships with.
    Model = 2,
    /// Nothing known: `assumed_pinned_gbps`.
    Assumed = 3,
}

/// The rate pinned host copies of one direction reach on this machine, and where it came from.
#[derive(Clone)]
pub struct Reference {
    /// GB/s.
    pub gbps: f64,
    /// Where it came from.
    pub source: Source,
    /// The link, when the rate came from one.
    link: Option<HostLink>,
    /// The GPU model named, when the link came from it.
    model: String,
}

impl Reference {
    /// The reference for copies on `device`, given the pinned copies of their direction in
    /// the trace (bytes, ns).
    pub(crate) fn of(cx: &Ctx, device: i32, pinned: Option<(u64, i64)>) -> Self {
        if let Some((b, ns)) = pinned.filter(|p| p.1 > 0) {
            return Reference {
                gbps: b as f64 / ns as f64,
                source: Source::Measured,
                link: None,
                model: String::new(),
            };
        }
        if let Some(link) = Self::link(cx, device) {
            return link;
        }
        Reference {
            gbps: cx.config.assumed_pinned_gbps,
            source: Source::Assumed,
            link: None,
            model: String::new(),
        }
    }

    /// The host link of `device`, from a snapshot first, else from its model.
    pub(crate) fn link(cx: &Ctx, device: i32) -> Option<Self> {
        let t = cx.trace;
        let snapshot = usize::try_from(device)
            .ok()
            .and_then(|k| t.inventory.get(k))
            .and_then(|inv| match (inv.pcie_gen.1, inv.pcie_width.1) {
                (Some(g), Some(w)) if g > 0 && w > 0 => Some(HostLink {
                    generation: g,
                    width: w,
                }),
                _ => None,
            });
        if let Some(link) = snapshot {
            return Some(Reference {
                gbps: link.pinned_gbps(),
                source: Source::Snapshot,
                link: Some(link),
                model: String::new(),
            });
        }
        let gpu = t.meta.gpu(device)?;
        let link = model_link(&gpu.name)?;
        Some(Reference {
            gbps: link.pinned_gbps(),
            source: Source::Model,
            link: Some(link),
            model: gpu.name.clone(),
        })
    }

    /// The link the rate came from, as the evidence states it: "the NVIDIA A100-PCIE-40GB's
    /// datasheet link, PCIe Gen4 x16, carries about 25.2 GB/s each way (80% of its raw 31.5)".
    pub(crate) fn said_link(&self) -> String {
        let Some(l) = &self.link else {
            return format!("pinned copies taken to reach {:.1} GB/s", self.gbps);
        };
        let rate = format!(
            "carries about {:.1} GB/s each way ({:.0}% of its raw {:.1})",
            self.gbps,
            100.0 * crate::hardware::LINK_ACHIEVABLE,
            l.raw_gbps()
        );
        match self.source {
            Source::Snapshot => format!(
                "the host link in the nvidia-smi -q -x snapshot, PCIe Gen{} x{}, {rate}",
                l.generation, l.width
            ),
            _ => format!(
                "the {}'s datasheet link, PCIe Gen{} x{}, {rate}",
                self.model, l.generation, l.width
            ),
        }
    }

    /// The reference as the evidence states it.
    pub(crate) fn said(&self, dir: CopyDirection) -> String {
        match self.source {
            Source::Measured => format!(
                "pinned {} copies in this trace reach {:.1} GB/s",
                dir.label(),
                self.gbps
            ),
            Source::Snapshot | Source::Model if self.link.is_some() => format!(
                "no pinned {} copies in this trace; {}",
                dir.label(),
                self.said_link()
            ),
            _ => format!(
                "no pinned {} copies in this trace and the host link is unknown: pinned copies assumed at {:.1} GB/s",
                dir.label(),
                self.gbps
            ),
        }
    }
}
