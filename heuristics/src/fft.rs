//! FFTs under PyTorch's `aten::_fft_r2c`, `aten::_fft_c2r` and `aten::_fft_c2c` (what
//! `torch.fft.*` and `torch.stft` call): the lengths they transform, the bytes a transform
//! moves at least (one pass per transformed dim, each reading and writing the data once: a
//! 1-D power-of-two transform fits one pass of cuFFT's kernels and runs near HBM speed, 78%
//! and 88% in the seventeenth blind set's twin; a 2-D one of 1024 × 1024 takes a pass per
//! dim), and whether the library ran Bluestein's algorithm, which its kernels' names say
//! (cuFFT's `multi_bluestein_fft`). Bluestein computes a length with a large prime factor as a
//! convolution of two transforms of at least twice the length, with passes before, between and
//! after them: in the seventeenth blind set, a transform of 16096 = 2⁵ × 503 samples took 4.7
//! ms where the same transform at 16384 took 0.4 ms.
//!
//! Found once per analysis ([`crate::context::Ctx::fft_calls`]): the accounting models the
//! FFT family's bytes with them, and the fft_lengths rule prices the Bluestein transforms
//! against a power-of-two length.

use crate::scope::Scope;
use rustc_hash::FxHashMap;
use tracehound_parsers::{HostKind, NONE};

/// The operators that run an FFT library's plan.
const FFT_OPS: [&str; 3] = ["aten::_fft_r2c", "aten::_fft_c2r", "aten::_fft_c2c"];

/// Which way a transform goes: its input and output element types differ for the real ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Real to complex: `rfft`; `onesided` keeps n/2 + 1 outputs along the last dim.
    R2c { onesided: bool },
    /// Complex to real: `irfft`; the input holds n/2 + 1 values along the last dim.
    C2r,
    /// Complex to complex: `fft`, `ifft`.
    C2c,
}

/// One FFT call on the GPU.
#[derive(Debug, Clone)]
pub(crate) struct FftCall {
    /// The `aten::_fft_*` span.
    pub span: u32,
    /// Its outermost operator (`aten::fft_rfft`).
    pub outer: u32,
    /// GPU time of the library's kernels under it (PyTorch's own copies and scalings, the
    /// `at::native` kernels, left out), ns.
    pub lib_ns: i64,
    /// Whether any of them is a Bluestein kernel.
    pub bluestein: bool,
    /// The signal lengths it transforms, in dim order.
    pub lengths: Vec<u64>,
    /// How many transforms one call runs (the elements of the dims it does not transform).
    pub batch: f64,
    /// Bytes of one real element (a complex one is twice that).
    pub real_elem: f64,
    /// Its direction.
    pub kind: Kind,
    /// A forward transform of the program's tensor at its own length (no pad before it under
    /// the same operator): another length needs a padded copy of its input.
    pub unpadded_input: bool,
}

impl FftCall {
    /// Bytes a transform of `lengths` moves at least, over the call's batch: a pass per
    /// transformed dim, each reading and writing the data once (the real one at the real
    /// end of a real transform).
    pub(crate) fn bytes_at(&self, lengths: &[u64]) -> f64 {
        let full: f64 = lengths.iter().map(|&x| x as f64).product();
        let last = lengths.last().map_or(1.0, |&x| x as f64).max(1.0);
        let half = full / last * (last / 2.0).floor() + full / last;
        let (r, c) = (self.real_elem, 2.0 * self.real_elem);
        let more = lengths.len().saturating_sub(1) as f64;
        self.batch
            * match self.kind {
                Kind::R2c { onesided: true } | Kind::C2r => {
                    full * r + half * c + more * 2.0 * half * c
                }
                Kind::R2c { onesided: false } => full * (r + c) + more * 2.0 * full * c,
                Kind::C2c => (1.0 + more) * 2.0 * full * c,
            }
    }

    /// Bytes of the padded copy a transform at `lengths` needs first: none where the call
    /// already transforms a padded copy or is an inverse (its input is a spectrum the forward
    /// transform made at that length); else the input read and the padded input written.
    pub(crate) fn pad_bytes_at(&self, lengths: &[u64]) -> f64 {
        if !self.unpadded_input {
            return 0.0;
        }
        let now: f64 = self.lengths.iter().map(|&x| x as f64).product();
        let then: f64 = lengths.iter().map(|&x| x as f64).product();
        let elem = match self.kind {
            Kind::R2c { .. } => self.real_elem,
            _ => 2.0 * self.real_elem,
        };
        self.batch * (now + then) * elem
    }

    /// Bytes of the call as recorded.
    pub(crate) fn bytes(&self) -> f64 {
        self.bytes_at(&self.lengths)
    }

    /// Each length raised to the next power of two: a length the library transforms in its
    /// fastest kernels, and what zero-padding a convolution or a spectrum to needs.
    pub(crate) fn power_of_two_lengths(&self) -> Vec<u64> {
        power_of_two(&self.lengths)
    }
}

/// Each of `lengths` raised to the next power of two.
pub(crate) fn power_of_two(lengths: &[u64]) -> Vec<u64> {
    lengths.iter().map(|&n| n.next_power_of_two()).collect()
}

/// The prime factors of `n`, smallest first, with repeats.
pub(crate) fn prime_factors(mut n: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut p = 2;
    while p * p <= n {
        while n.is_multiple_of(p) {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

/// `n` as a product of prime powers: "2^5 × 503".
pub(crate) fn factors_text(n: u64) -> String {
    let mut parts: Vec<String> = Vec::new();
    let f = prime_factors(n);
    let mut i = 0;
    while i < f.len() {
        let p = f[i];
        let k = f[i..].iter().take_while(|&&q| q == p).count();
        parts.push(if k > 1 {
            format!("{p}^{k}")
        } else {
            p.to_string()
        });
        i += k;
    }
    if parts.is_empty() {
        n.to_string()
    } else {
        parts.join(" × ")
    }
}

/// Bytes of a real element from a recorded type (complex types count their real half).
fn real_elem(ty: &str) -> Option<f64> {
    Some(match ty {
        "float" | "c10::complex<float>" => 4.0,
        "double" | "c10::complex<double>" => 8.0,
        "c10::Half" | "c10::BFloat16" | "c10::complex<c10::Half>" => 2.0,
        _ => return None,
    })
}

/// A recorded integer list (`[1]`, `[-2, -1]`).
fn int_list(s: &str) -> Vec<i64> {
    s.trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .filter_map(|x| x.trim().parse().ok())
        .collect()
}

/// Device `d`'s calls from the per-device lists; empty without any.
pub(crate) fn calls_of(all: &[(i32, Vec<FftCall>)], d: i32) -> &[FftCall] {
    all.iter()
        .find(|(x, _)| *x == d)
        .map_or(&[], |(_, c)| c.as_slice())
}

/// The FFT calls with kernels on device `d` in the window whose geometry the trace records
/// (shapes, types and the operators' concrete arguments), in span order. Empty without them.
pub(crate) fn calls(cx: &Scope, d: i32) -> Vec<FftCall> {
    let t = cx.trace;
    let w = &cx.window;
    let names = t.strings.matching(|n| FFT_OPS.contains(&n));
    if !names.contains(&true) {
        return Vec::new();
    }
    let is_fft = |s: u32| {
        names
            .get(t.host_spans[s as usize].name as usize)
            .copied()
            .unwrap_or(false)
    };
    // (library ns, any Bluestein kernel) per FFT span.
    let mut per: FxHashMap<u32, (i64, bool)> = FxHashMap::default();
    for (i, op) in w.kernels(t, d) {
        let mut s = t.index.op_cpu_op.get(i).copied().unwrap_or(NONE);
        // The library's kernels sit under the FFT operator itself or a copy it makes; a few
        // levels up is enough.
        for _ in 0..4 {
            if s == NONE {
                break;
            }
            if is_fft(s) {
                let name = t.str(op.name);
                if !name.contains("at::native") {
                    let e = per.entry(s).or_default();
                    e.0 += op.dur();
                    e.1 |= name.to_ascii_lowercase().contains("bluestein");
                }
                break;
            }
            s = t.enclosing(s, HostKind::CpuOp);
        }
    }
    let mut out: Vec<FftCall> = per
        .into_iter()
        .filter_map(|(span, (lib_ns, bluestein))| {
            let name = t.str(t.host_spans[span as usize].name);
            let dims = t.input_dims(span);
            let shape = dims.first()?;
            let ty = t.input_types(span).first().cloned()?;
            let real_elem = real_elem(&ty)?;
            let args = t.concrete_inputs_of(span)?;
            let rank = shape.len() as i64;
            let axes: Vec<usize> = int_list(args.get(1)?)
                .into_iter()
                .map(|a| if a < 0 { a + rank } else { a })
                .filter(|&a| (0..rank).contains(&a))
                .map(|a| a as usize)
                .collect();
            if axes.is_empty() {
                return None;
            }
            let mut lengths: Vec<u64> = axes.iter().map(|&a| shape[a]).collect();
            // A forward transform at its operator's own input shape pads nothing itself.
            let outer = t.outermost_cpu_op(span);
            let own_length = t.input_dims(outer).first() == Some(shape);
            let kind = match name {
                "aten::_fft_r2c" => Kind::R2c {
                    onesided: args.get(3).is_none_or(|x| x != "False"),
                },
                "aten::_fft_c2r" => {
                    // The input holds n/2 + 1 values along the last axis; n is the argument.
                    let n: u64 = args.get(3)?.parse().ok()?;
                    *lengths.last_mut()? = n;
                    Kind::C2r
                }
                _ => Kind::C2c,
            };
            let numel: f64 = shape.iter().map(|&x| x as f64).product();
            let along: f64 = axes.iter().map(|&a| shape[a] as f64).product();
            let forward = match kind {
                Kind::R2c { .. } => true,
                Kind::C2r => false,
                Kind::C2c => args.get(3).is_none_or(|x| x != "False"),
            };
            (along > 0.0 && lengths.iter().all(|&n| n > 0)).then(|| FftCall {
                span,
                outer,
                unpadded_input: forward && own_length,
                lib_ns,
                bluestein,
                lengths,
                batch: numel / along,
                real_elem,
                kind,
            })
        })
        .collect();
    out.sort_by_key(|c| c.span);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(kind: Kind, lengths: Vec<u64>) -> FftCall {
        FftCall {
            span: 0,
            outer: 0,
            lib_ns: 0,
            bluestein: false,
            lengths,
            batch: 8192.0,
            real_elem: 4.0,
            kind,
            unpadded_input: false,
        }
    }

    #[test]
    fn a_transform_reads_its_input_and_writes_its_output_once() {
        // The seventeenth blind set's forward transform: 8192 rows of 16096 floats in,
        // 8049 complex values a row out.
        let c = call(Kind::R2c { onesided: true }, vec![16096]);
        assert_eq!(c.bytes(), 8192.0 * (16096.0 * 4.0 + 8049.0 * 8.0));
        // Its inverse moves the same bytes the other way.
        assert_eq!(call(Kind::C2r, vec![16096]).bytes(), c.bytes());
        // A complex transform reads and writes complex values.
        assert_eq!(
            call(Kind::C2c, vec![1024]).bytes(),
            8192.0 * 2.0 * 1024.0 * 8.0
        );
        assert_eq!(c.power_of_two_lengths(), vec![16384]);
        // A 2-D real transform: the real pass along the last dim, then a complex pass over
        // the half spectrum along the other.
        let c = call(Kind::R2c { onesided: true }, vec![1024, 1024]);
        let half = 1024.0 * 513.0 * 8.0;
        assert_eq!(c.bytes(), 8192.0 * (1024.0 * 1024.0 * 4.0 + 3.0 * half));
        // A padded copy is needed only before a forward transform of the program's tensor.
        assert_eq!(c.pad_bytes_at(&[2048, 2048]), 0.0);
        let c = FftCall {
            unpadded_input: true,
            ..call(Kind::C2c, vec![3001])
        };
        assert_eq!(c.pad_bytes_at(&[4096]), 8192.0 * (3001.0 + 4096.0) * 8.0);
    }

    #[test]
    fn lengths_are_written_as_prime_powers() {
        assert_eq!(factors_text(16096), "2^5 × 503");
        assert_eq!(factors_text(16384), "2^14");
        assert_eq!(factors_text(15120), "2^4 × 3^3 × 5 × 7");
        assert_eq!(factors_text(1021), "1021");
    }
}
