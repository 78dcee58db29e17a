//! The fast event scanner: a chunk of events read with [`json_scan`](super::json_scan)
//! straight into the builder, without a `serde_json::Value`; anything it does not take goes
//! to serde.

use super::*;

/// Whether chunks are read with the [`json_scan`] fast path (the default) before
/// serde. Tests turn it off to compare both readings of the same files.
#[doc(hidden)]
pub static FAST_SCAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Chunks the scanner handed to serde (a test's window into the fast path's coverage).
#[doc(hidden)]
pub static SCAN_FALLBACKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Reads a chunk (`[event, ...]`) with the scanner into `b`. A `bare` chunk is one as the
/// splitter cuts it, read where it lies: it opens with `[` or with the `,` after the previous
/// chunk, and its end closes the array (it reads as the array the chunk would be made into).
///
/// The array, each event and its `args` are read by loops that keep the position in a
/// local (a register) rather than behind the scanner's `&mut`; strings without escapes and
/// plain numbers are taken in place, and only the uncommon values go through [`Scan`].
pub(super) fn scan_events(text: &[u8], b: &mut Builder, bare: bool) -> Scanned<()> {
    // One event struct read into again and again: returned by value it was copied twice per
    // event (it is some 500 bytes, more than the event's text).
    let mut ev = RawEvent::default();
    let mut shapes = Shapes::default();
    let mut p = skip_ws(text, 0);
    match text.get(p) {
        Some(b'[') => {}
        Some(b',') if bare => {}
        _ => return Err(Bail),
    }
    p = skip_ws(text, p + 1);
    let empty = if bare {
        p == text.len()
    } else {
        text.get(p) == Some(&b']')
    };
    if empty {
        p += usize::from(!bare);
    } else {
        loop {
            if text.get(p) == Some(&b'{') {
                p = scan_event(text, p, &mut ev, &mut shapes)?;
                b.add(&ev);
            } else {
                let mut s = Scan::at(text, p);
                s.skip_value()?;
                p = s.pos();
                b.events += 1;
                b.skip("not an object");
            }
            p = skip_ws(text, p);
            match text.get(p) {
                Some(b',') => p = skip_ws(text, p + 1),
                Some(b']') if !bare => {
                    p += 1;
                    break;
                }
                None if bare => break,
                _ => return Err(Bail),
            }
        }
    }
    if skip_ws(text, p) == text.len() {
        Ok(())
    } else {
        Err(Bail)
    }
}

/// Marks a field as read; a second occurrence bails (serde rejects duplicate fields).
#[inline(always)]
pub(super) fn once(seen: &mut u32, bit: u32) -> Scanned<()> {
    if *seen & bit != 0 {
        return Err(Bail);
    }
    *seen |= bit;
    Ok(())
}

/// A lenient string at `p`: one without escapes is borrowed in place.
#[inline(always)]
pub(super) fn lstr_at<'a>(text: &'a [u8], p: usize) -> Scanned<(LStr<'a>, usize)> {
    if text.get(p) == Some(&b'"')
        && let Some(end) = plain_string_end(text, p)
    {
        // SAFETY: `plain_string_end` stops at the first byte that is not ASCII, so the
        // string's text before its closing quote at `end` is ASCII.
        let s = unsafe { ascii_text(text, p + 1, end) };
        return Ok((LStr(Some(std::borrow::Cow::Borrowed(s))), end + 1));
    }
    let mut s = Scan::at(text, p);
    let v = s.lstr()?;
    Ok((v, s.pos()))
}

/// The raw text of the value at `p`, `None` for `null`: numbers are taken in place.
#[inline(always)]
pub(super) fn raw_at(text: &[u8], p: usize) -> Scanned<(Option<&str>, usize)> {
    if let Some(b'-' | b'0'..=b'9') = text.get(p) {
        let end = number_end(text, p);
        // SAFETY: a number's bytes are ASCII (`number_end`).
        return Ok((Some(unsafe { ascii_text(text, p, end) }), end));
    }
    let mut s = Scan::at(text, p);
    let v = s.raw()?;
    Ok((v, s.pos()))
}

/// [`raw_at`], arrays looked up in `arrays` first.
#[inline(always)]
pub(super) fn array_or_raw_at<'a>(
    text: &'a [u8],
    p: usize,
    arrays: &mut Arrays,
) -> Scanned<(Option<&'a str>, usize)> {
    if text.get(p) == Some(&b'[') {
        let (v, end) = arrays.take(text, p)?;
        return Ok((Some(v), end));
    }
    raw_at(text, p)
}

/// [`skip_at`], arrays looked up in `arrays` first.
#[inline(always)]
pub(super) fn array_or_skip_at(text: &[u8], p: usize, arrays: &mut Arrays) -> Scanned<usize> {
    if text.get(p) == Some(&b'[') {
        return Ok(arrays.take(text, p)?.1);
    }
    skip_at(text, p)
}

/// Skips the value at `p`.
#[inline(always)]
pub(super) fn skip_at(text: &[u8], p: usize) -> Scanned<usize> {
    if let Some(b'-' | b'0'..=b'9') = text.get(p) {
        return Ok(number_end(text, p));
    }
    let mut s = Scan::at(text, p);
    s.skip_value()?;
    Ok(s.pos())
}

/// Runs a [`Scan`] reader on the value at `p`.
#[inline(always)]
pub(super) fn with_scan<'a, T>(
    text: &'a [u8],
    p: usize,
    read: impl FnOnce(&mut Scan<'a>) -> Scanned<T>,
) -> Scanned<(T, usize)> {
    let mut s = Scan::at(text, p);
    let v = read(&mut s)?;
    Ok((v, s.pos()))
}

/// The member loop of the object whose `{` is at `$p`, returning from the enclosing
/// function with the position after its `}`: for each member, `$arm` is its key's number
/// (`$arm_of`) and `$p` the position of its value, and `$read` (a `match` on the number)
/// leaves `$p` after the value. The separators and key order are remembered in `$members`
/// ([`Members`]). A macro, not a function taking a closure: on the hot path the closure cost
/// 2% more instructions (the 121 MB trace's `info`: 1.673 G against 1.702 G).
macro_rules! members {
    ($text:ident, $p:ident, $members:expr, $arm_of:path, $arm:ident => $read:block) => {{
        let members: &mut Members = $members;
        let mut at = Cursor::start();
        let mut $p = $p;
        loop {
            let $arm = match members.next($text, $p, &mut at, $arm_of)? {
                Step::Member { arm, value } => {
                    $p = value;
                    arm
                }
                Step::End(end) => return Ok(end),
            };
            $read
        }
    }};
}

/// Numbers keys for the scanner's `match`es: a module of constants, 1 up in the order given
/// (0, `OTHER`, for any other key), and the function from a key's text to its number, from
/// one list, so the two cannot drift apart.
macro_rules! key_numbers {
    ($(#[$doc:meta])* mod $module:ident; $(#[$fdoc:meta])* fn $func:ident;
     $($name:ident = $($key:literal)|+,)*) => {
        $(#[$doc])*
        mod $module {
            pub const OTHER: u8 = 0;
            key_numbers!(@count 1u8; $($name)*);
        }
        $(#[$fdoc])*
        fn $func(key: &str) -> u8 {
            match key {
                $($($key)|+ => $module::$name,)*
                _ => $module::OTHER,
            }
        }
    };
    (@count $n:expr; $first:ident $($rest:ident)*) => {
        pub const $first: u8 = $n;
        key_numbers!(@count $n + 1; $($rest)*);
    };
    (@count $n:expr;) => {};
}

key_numbers! {
    /// The number of each event key the scanner reads ([`scan_event`]'s arms).
    mod ev_arm;
    /// [`ev_arm`]'s number of an event key.
    fn event_arm;
    PH = "ph",
    CAT = "cat",
    NAME = "name",
    TS = "ts",
    DUR = "dur",
    PID = "pid",
    TID = "tid",
    ARGS = "args",
}

key_numbers! {
    /// The number of each `args` key the scanner reads ([`scan_args`]' arms).
    mod args_arm;
    /// [`args_arm`]'s number of an `args` key.
    fn args_arm;
    CORRELATION = "correlation",
    EXTERNAL_ID = "External id" | "external id",
    DEVICE = "device",
    STREAM = "stream",
    BYTES = "bytes",
    GRID = "grid",
    BLOCK = "block",
    REGISTERS_PER_THREAD = "registers per thread",
    SHARED_MEMORY = "shared memory",
    EST_ACHIEVED_OCCUPANCY = "est. achieved occupancy %",
    MEM_BYTES = "Bytes",
    TOTAL_ALLOCATED = "Total Allocated",
    TOTAL_RESERVED = "Total Reserved",
    DEVICE_TYPE = "Device Type",
    DEVICE_ID = "Device Id",
    ADDR = "Addr",
    INPUT_DIMS = "Input Dims" | "Input dims",
    INPUT_TYPE = "Input type",
    CALL_STACK = "Call stack",
    KIND = "kind",
    CONCRETE_INPUTS = "Concrete Inputs",
    INPUT_STRIDES = "Input Strides",
    NAME = "name",
    IN_NELEMS = "In msg nelems",
    OUT_NELEMS = "Out msg nelems",
    DTYPE = "dtype",
}

/// What the scanner remembers of the events' and their args' shapes ([`Members`]).
#[derive(Default)]
pub(super) struct Shapes {
    pub(super) event: Members,
    pub(super) args: Members,
    /// The arrays of args read before ([`Arrays`]).
    pub(super) arrays: Arrays,
}

/// Reads one event object, as [`RawEvent`]'s serde derive reads it, from `p` (its `{`);
/// returns the position after its `}`.
pub(super) fn scan_event<'a>(
    text: &'a [u8],
    p: usize,
    ev: &mut RawEvent<'a>,
    shapes: &mut Shapes,
) -> Scanned<usize> {
    // Every field cleared (the pattern names them all, so a new field cannot be missed);
    // `args` is filled in place when the event has them.
    let RawEvent {
        ph,
        cat,
        name,
        ts,
        dur,
        pid,
        tid,
        args,
    } = ev;
    (*ph, *cat, *name) = (LStr::default(), LStr::default(), LStr::default());
    (*ts, *dur, *pid, *tid) = (None, None, None, None);
    *args = None;
    let mut seen = 0u32;
    members!(text, p, &mut shapes.event, event_arm, arm => {
        match arm {
            ev_arm::PH => {
                once(&mut seen, 1)?;
                (ev.ph, p) = lstr_at(text, p)?;
                // Flows are skipped whatever else they hold (see Builder::add): a fifth of a
                // torch trace's events need no more reading. Metadata is read for the
                // threads' names.
                if matches!(ev.ph.as_str(), "s" | "f" | "t") {
                    let mut s = Scan::at(text, p);
                    s.skip_rest_of_object()?;
                    return Ok(s.pos());
                }
            }
            ev_arm::CAT => {
                once(&mut seen, 2)?;
                (ev.cat, p) = lstr_at(text, p)?;
            }
            ev_arm::NAME => {
                once(&mut seen, 4)?;
                (ev.name, p) = lstr_at(text, p)?;
            }
            ev_arm::TS => {
                once(&mut seen, 8)?;
                (ev.ts, p) = raw_at(text, p)?;
            }
            ev_arm::DUR => {
                once(&mut seen, 16)?;
                (ev.dur, p) = raw_at(text, p)?;
            }
            ev_arm::PID => {
                once(&mut seen, 32)?;
                (ev.pid, p) = raw_at(text, p)?;
            }
            ev_arm::TID => {
                once(&mut seen, 64)?;
                (ev.tid, p) = raw_at(text, p)?;
            }
            ev_arm::ARGS => {
                once(&mut seen, 128)?;
                match text.get(p) {
                    Some(b'{') => {
                        let a = ev.args.insert(RawArgs::default());
                        p = scan_args(text, p, a, &mut shapes.args, &mut shapes.arrays)?;
                    }
                    Some(b'n') => p = skip_at(text, p)?,
                    // Metadata is read only for the names it gives: odd args are skipped.
                    _ if ev.ph.as_str() == "M" => p = skip_at(text, p)?,
                    _ => return Err(Bail),
                }
            }
            _ => p = skip_at(text, p)?,
        }
    })
}

/// An event's `args` from `p` (its `{`), as [`RawArgs`]' serde derive reads them; returns
/// the position after the closing `}`.
pub(super) fn scan_args<'a>(
    text: &'a [u8],
    p: usize,
    a: &mut RawArgs<'a>,
    members: &mut Members,
    arrays: &mut Arrays,
) -> Scanned<usize> {
    let mut seen = 0u32;
    members!(text, p, members, args_arm, arm => {
        match arm {
            args_arm::CORRELATION => {
                once(&mut seen, 1)?;
                (a.correlation, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::EXTERNAL_ID => {
                once(&mut seen, 1 << 1)?;
                (a.external_id, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::DEVICE => {
                once(&mut seen, 1 << 2)?;
                (a.device, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::STREAM => {
                once(&mut seen, 1 << 3)?;
                (a.stream, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::BYTES => {
                once(&mut seen, 1 << 4)?;
                (a.bytes, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::GRID => {
                once(&mut seen, 1 << 5)?;
                let (d, at) = with_scan(text, p, Scan::dims)?;
                (a.grid, p) = (Some(d), at);
            }
            args_arm::BLOCK => {
                once(&mut seen, 1 << 6)?;
                let (d, at) = with_scan(text, p, Scan::dims)?;
                (a.block, p) = (Some(d), at);
            }
            args_arm::REGISTERS_PER_THREAD => {
                once(&mut seen, 1 << 7)?;
                (a.registers, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::SHARED_MEMORY => {
                once(&mut seen, 1 << 8)?;
                (a.shared_mem, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::EST_ACHIEVED_OCCUPANCY => {
                once(&mut seen, 1 << 9)?;
                (a.occupancy, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::MEM_BYTES => {
                once(&mut seen, 1 << 10)?;
                (a.mem_bytes, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::TOTAL_ALLOCATED => {
                once(&mut seen, 1 << 11)?;
                (a.total_allocated, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::TOTAL_RESERVED => {
                once(&mut seen, 1 << 12)?;
                (a.total_reserved, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::DEVICE_TYPE => {
                once(&mut seen, 1 << 13)?;
                (a.device_type, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::DEVICE_ID => {
                once(&mut seen, 1 << 14)?;
                (a.device_id, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::ADDR => {
                once(&mut seen, 1 << 15)?;
                (a.addr, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::INPUT_DIMS => {
                once(&mut seen, 1 << 16)?;
                (a.input_dims, p) = array_or_raw_at(text, p, arrays)?;
            }
            args_arm::INPUT_TYPE => {
                once(&mut seen, 1 << 17)?;
                (a.input_type, p) = array_or_raw_at(text, p, arrays)?;
            }
            args_arm::CALL_STACK => {
                once(&mut seen, 1 << 18)?;
                (a.call_stack, p) = lstr_at(text, p)?;
            }
            args_arm::KIND => {
                once(&mut seen, 1 << 19)?;
                (a.kind, p) = lstr_at(text, p)?;
            }
            args_arm::CONCRETE_INPUTS => {
                once(&mut seen, 1 << 20)?;
                (a.concrete, p) = array_or_raw_at(text, p, arrays)?;
            }
            args_arm::NAME => {
                once(&mut seen, 1 << 21)?;
                (a.name, p) = lstr_at(text, p)?;
            }
            args_arm::INPUT_STRIDES => {
                once(&mut seen, 1 << 22)?;
                (a.input_strides, p) = array_or_raw_at(text, p, arrays)?;
            }
            args_arm::IN_NELEMS => {
                once(&mut seen, 1 << 23)?;
                (a.in_nelems, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::OUT_NELEMS => {
                once(&mut seen, 1 << 24)?;
                (a.out_nelems, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::DTYPE => {
                once(&mut seen, 1 << 25)?;
                (a.dtype, p) = lstr_at(text, p)?;
            }
            _ => p = array_or_skip_at(text, p, arrays)?,
        }
    })
}
