//! The serde reading of a chunk, for what the fast scanner does not take (and to say where
//! bad JSON is wrong), and of the document around the events array (metadata, device
//! properties, distributed info).

use super::*;

#[derive(Deserialize, Default)]
pub(super) struct RawArgs<'a> {
    #[serde(default)]
    pub(super) correlation: Num,
    #[serde(default, rename = "External id", alias = "external id")]
    pub(super) external_id: Num,
    #[serde(default)]
    pub(super) device: Num,
    #[serde(default)]
    pub(super) stream: Num,
    #[serde(default)]
    pub(super) bytes: Num,
    #[serde(default)]
    pub(super) grid: Option<Dims>,
    #[serde(default)]
    pub(super) block: Option<Dims>,
    #[serde(default, rename = "registers per thread")]
    pub(super) registers: Num,
    #[serde(default, rename = "shared memory")]
    pub(super) shared_mem: Num,
    #[serde(default, rename = "est. achieved occupancy %")]
    pub(super) occupancy: Num,
    #[serde(default, rename = "Bytes")]
    pub(super) mem_bytes: Num,
    #[serde(default, rename = "Total Allocated")]
    pub(super) total_allocated: Num,
    #[serde(default, rename = "Total Reserved")]
    pub(super) total_reserved: Num,
    #[serde(default, rename = "Device Type")]
    pub(super) device_type: Num,
    #[serde(default, rename = "Device Id")]
    pub(super) device_id: Num,
    #[serde(default, rename = "Addr")]
    pub(super) addr: Num,
    #[serde(
        borrow,
        default,
        rename = "Input Dims",
        alias = "Input dims",
        deserialize_with = "raw_text"
    )]
    pub(super) input_dims: Option<&'a str>,
    #[serde(borrow, default, rename = "Input type", deserialize_with = "raw_text")]
    pub(super) input_type: Option<&'a str>,
    #[serde(
        borrow,
        default,
        rename = "Concrete Inputs",
        deserialize_with = "raw_text"
    )]
    pub(super) concrete: Option<&'a str>,
    #[serde(
        borrow,
        default,
        rename = "Input Strides",
        deserialize_with = "raw_text"
    )]
    pub(super) input_strides: Option<&'a str>,
    #[serde(borrow, default, rename = "Call stack")]
    pub(super) call_stack: LStr<'a>,
    #[serde(borrow, default)]
    pub(super) kind: LStr<'a>,
    /// The name a metadata event gives (`thread_name`: the thread's).
    #[serde(borrow, default)]
    pub(super) name: LStr<'a>,
    /// A collective's input elements (`record_param_comms` and, since PyTorch 2.1, its kernel).
    #[serde(default, rename = "In msg nelems")]
    pub(super) in_nelems: Num,
    /// A collective's output elements.
    #[serde(default, rename = "Out msg nelems")]
    pub(super) out_nelems: Num,
    /// A collective's element type (`Float`, `BFloat16`).
    #[serde(borrow, default)]
    pub(super) dtype: LStr<'a>,
}

/// The text of a value as written, `None` for `null` (timestamps and ids keep their digits).
pub(super) fn raw_text<'de, D: de::Deserializer<'de>>(d: D) -> Result<Option<&'de str>, D::Error> {
    Option::<&'de RawValue>::deserialize(d).map(|v| v.map(RawValue::get))
}

#[derive(Deserialize, Default)]
pub(super) struct RawEvent<'a> {
    #[serde(borrow, default)]
    pub(super) ph: LStr<'a>,
    #[serde(borrow, default)]
    pub(super) cat: LStr<'a>,
    #[serde(borrow, default)]
    pub(super) name: LStr<'a>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub(super) ts: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub(super) dur: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub(super) pid: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub(super) tid: Option<&'a str>,
    #[serde(borrow, default)]
    pub(super) args: Option<RawArgs<'a>>,
}

#[derive(Deserialize, Default)]
pub(super) struct RawDeviceProps<'a> {
    #[serde(default)]
    pub(super) id: Num,
    #[serde(borrow, default)]
    pub(super) name: LStr<'a>,
    #[serde(default, rename = "totalGlobalMem")]
    pub(super) total_mem: Num,
    #[serde(default, rename = "computeMajor")]
    pub(super) major: Num,
    #[serde(default, rename = "computeMinor")]
    pub(super) minor: Num,
    #[serde(default, rename = "numSms")]
    pub(super) sms: Num,
}

#[derive(Deserialize, Default)]
pub(super) struct RawDistributed {
    #[serde(default)]
    pub(super) rank: Num,
    #[serde(default)]
    pub(super) world_size: Num,
}

pub(super) struct TopSeed<'b> {
    pub(super) b: &'b mut Builder,
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace object with traceEvents, or an array of events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        self.b.saw_events_container = true;
        EventsSeed { b: self.b }.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<LStr<'de>>()? {
            match key.as_str() {
                "traceEvents" => {
                    self.b.saw_events_container = true;
                    map.next_value_seed(EventsSeed { b: self.b })?;
                }
                "deviceProperties" => {
                    let props: Vec<RawDeviceProps<'de>> = map
                        .next_value::<Option<Vec<RawDeviceProps<'de>>>>()?
                        .unwrap_or_default();
                    self.b.trace.meta.gpus = props
                        .iter()
                        .enumerate()
                        .map(|(k, p)| GpuInfo {
                            id: p.id.i64().unwrap_or(k as i64) as i32,
                            name: p.name.as_str().to_string(),
                            compute_capability: match (p.major.u64(), p.minor.u64()) {
                                (Some(a), Some(b)) => Some((a as u32, b as u32)),
                                _ => None,
                            },
                            sm_count: p.sms.u64().map(|v| v as u32),
                            memory_bytes: p.total_mem.u64(),
                        })
                        .collect();
                }
                "distributedInfo" => {
                    let d: Option<RawDistributed> = map.next_value()?;
                    if let Some(d) = d {
                        self.b.trace.meta.rank = d.rank.i64();
                        self.b.trace.meta.world_size = d.world_size.i64();
                    }
                }
                "baseTimeNanoseconds" => {
                    let n: Num = map.next_value()?;
                    self.b.base_time_ns = n.i64();
                }
                "schemaVersion" => {
                    let n: Num = map.next_value()?;
                    self.b.schema_version = n.i64();
                }
                "cupti_version" => {
                    let n: Num = map.next_value()?;
                    self.b.cupti_version = n.i64();
                    self.b.trace.meta.stack.cupti = n.i64();
                }
                k @ ("cuda_driver_version" | "cuda_runtime_version") => {
                    let driver = k == "cuda_driver_version";
                    let n: Num = map.next_value()?;
                    let v = n
                        .u64()
                        .and_then(|v| u32::try_from(v).ok())
                        .filter(|&v| v > 0);
                    let stack = &mut self.b.trace.meta.stack;
                    if driver {
                        stack.driver_cuda = v;
                    } else {
                        stack.runtime_cuda = v;
                    }
                }
                k @ ("record_shapes" | "profile_memory" | "with_stack" | "with_flops"
                | "with_modules") => {
                    let k = k.to_string();
                    let v: &RawValue = map.next_value()?;
                    self.b
                        .trace
                        .meta
                        .capture_options
                        .push((k, v.get().to_string()));
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

pub(super) struct EventsSeed<'b> {
    pub(super) b: &'b mut Builder,
}

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of trace events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(el) = seq.next_element::<Element<'de>>()? {
            match el.0 {
                Some(ev) => self.b.add(&ev),
                None => {
                    self.b.events += 1;
                    self.b.skip("not an object");
                }
            }
        }
        Ok(())
    }
}

/// One element of the events array: an event object, or anything else (counted, skipped).
pub(super) struct Element<'a>(Option<RawEvent<'a>>);

pub(super) struct ElementVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for ElementVisitor<'a> {
    type Value = Element<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace event")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Element<'a>, A::Error> {
        RawEvent::deserialize(de::value::MapAccessDeserializer::new(map)).map(|e| Element(Some(e)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Element<'a>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Element(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Element<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ElementVisitor(std::marker::PhantomData))
    }
}
