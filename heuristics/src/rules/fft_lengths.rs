//! FFTs at lengths the library has no fast kernels for. cuFFT computes a length with a large
//! prime factor by Bluestein's algorithm, a convolution of two transforms of at least twice
//! the length with passes before, between and after: its kernels say so by name
//! (`multi_bluestein_fft`), and the trace records the lengths (the operators' shapes and
//! arguments, [`crate::fft`]). Where the length is the program's choice (an FFT convolution,
//! a zero-padded spectrum), padding to a power of two gives the same result after truncation.
//!
//! Impact: the Bluestein calls' library kernel time beyond what the same transforms at the
//! next power of two need at 70% of the HBM roof ([`ACHIEVABLE`]): a pass per transformed dim
//! reading and writing the data once (one pass of cuFFT's power-of-two kernels ran at 78% and
//! 88% of HBM in the seventeenth blind set's twin), and, where a forward transform takes the
//! program's tensor at its own length, the padded copy another length needs (the eighteenth
//! set's complex transform of 3001 samples ran Bluestein at 1.5 times the time of 4096, and
//! padding to 4096 took back most of that). PyTorch's own kernels under the operators (a pad
//! the program already asked for, the copy before an inverse transform) are left out: a
//! length change keeps them. Reported from 3% of the window and a quarter of the Bluestein
//! calls' own time (below it the saving is within the estimate's error); calls without
//! recorded shapes and arguments are not priced.

use super::Rule;
use crate::context::{Ctx, new_finding, per_step_note};
use crate::finding::{Confidence, Finding, Row, fmt_ns, metrics};
use crate::roofline::ACHIEVABLE;
use std::collections::BTreeMap;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "fft_lengths";

/// The rule.
pub struct FftLengths;

/// Calls grouped by operator, lengths and the user's Python frame.
type Group = (String, Vec<u64>, Option<String>);

/// Share of the window the saving must reach (launch_bound's and sync_stalls').
const MIN_SHARE: f64 = 0.03;

/// Share of the Bluestein calls' own time the saving must reach: the power-of-two estimate
/// assumes 70% of HBM where cuFFT's one-pass kernels reached 78-88%, so a smaller saving is
/// within the model's error (the eighteenth set's complex transform of 3001 samples: its
/// Bluestein kernels took 5.7 ms against 5.2 estimated at 4096 with the padded copy, and the
/// twin padded to 4096 saved 0.3 ms in all).
const MIN_SAVING_SHARE: f64 = 0.25;

impl Rule for FftLengths {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "FFTs at lengths with a large prime factor, which cuFFT computes with Bluestein's algorithm at several times the time of a power-of-two length"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let mut out = Vec::new();
        for d in t.devices() {
            let Some(peaks) = crate::membound::peaks_of(t, d) else {
                continue;
            };
            let calls = cx.fft_calls(d);
            // Per (operator, lengths, frame): calls, library ns.
            let mut groups: BTreeMap<Group, (u64, i64)> = BTreeMap::new();
            let (mut lib_ns, mut fast_ns, mut n_calls) = (0i64, 0.0f64, 0usize);
            for c in calls.iter().filter(|c| c.bluestein) {
                n_calls += 1;
                let to = c.power_of_two_lengths();
                lib_ns += c.lib_ns;
                fast_ns += (c.bytes_at(&to) + c.pad_bytes_at(&to))
                    / (ACHIEVABLE * peaks.mem_tbps * 1e3);
                let g = groups
                    .entry((
                        t.str(t.host_spans[c.span as usize].name).to_string(),
                        c.lengths.clone(),
                        t.user_frame(c.span).map(str::to_string),
                    ))
                    .or_default();
                g.0 += 1;
                g.1 += c.lib_ns;
            }
            // The forward and inverse transforms change length together: their time is
            // compared as a whole (an inverse that gains where the forward's padded copy loses).
            let saving = (lib_ns as f64 - fast_ns).max(0.0);
            if cx.window.share(saving as i64) < MIN_SHARE
                || saving < MIN_SAVING_SHARE * lib_ns as f64
            {
                continue;
            }
            // The lengths that hold most of the time name the finding.
            let Some(top) = groups
                .iter()
                .max_by(|a, b| a.1.1.cmp(&b.1.1).then(b.0.cmp(a.0)))
                .map(|(k, _)| k.1.clone())
            else {
                continue;
            };
            let mut rows: Vec<Row> = groups
                .into_iter()
                .map(|((op, lengths, frame), (n, ns))| Row {
                    label: format!("{op} n = {}", lengths_text(&lengths)),
                    count: n,
                    time_ns: ns,
                    bytes: None,
                    python_frame: frame,
                    cause: None,
                    share: Some(ns as f64 / lib_ns.max(1) as f64),
                })
                .collect();
            rows.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.label.cmp(&b.label)));
            rows.truncate(cx.config.max_rows);
            let frame = rows
                .first()
                .and_then(|r| r.python_frame.as_deref())
                .map(|f| format!(" at {f}"))
                .unwrap_or_default();
            let to_text = crate::fft::power_of_two(&top)
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" × ");
            let per_step = per_step_note(cx, saving);
            let mut f = new_finding(
                cx,
                ID,
                Some(d),
                format!(
                    "FFTs of length {}{frame} run cuFFT's Bluestein kernels: {} of GPU time, where the next power of two ({}) needs about {}; choosing the length saves {}{per_step}",
                    lengths_text(&top),
                    fmt_ns(lib_ns),
                    to_text,
                    fmt_ns(fast_ns as i64),
                    fmt_ns(saving as i64)
                ),
                saving as i64,
                Confidence::Medium,
                format!(
                    "{n_calls} FFT calls ran kernels named for Bluestein's algorithm, which cuFFT uses for a length whose prime factors it has no fast kernel for: the transform becomes a convolution of two transforms of at least twice the length, with passes before, between and after them. Impact: the library kernels' time beyond what the same transforms at the next power of two need at {:.0}% of the HBM roof ({:.1} TB/s: a pass per transformed dim reading and writing the data once, as cuFFT's power-of-two kernels do, plus the padded copy of an input transformed at its own length); PyTorch's own kernels around them (a pad already asked for, the copy before an inverse transform) are left out",
                    100.0 * ACHIEVABLE,
                    peaks.mem_tbps
                ),
            );
            f.breakdown = rows;
            f.advice = vec![
                format!(
                    "Where the length is the program's choice (an FFT convolution, a zero-padded spectrum, an STFT's n_fft), make it a power of two ({to_text}) or a product of 2s, 3s, 5s and 7s (scipy.fft.next_fast_len(n)): a convolution's result is the same after truncating it to the length it needs (y[..., :n])."
                ),
                "Where the length is the data's (a spectrum of exactly n samples), pad or crop the signal once where it is made, or resample it, rather than transforming the awkward length every step.".to_string(),
            ];
            f.metrics = metrics([
                ("calls", n_calls as f64),
                ("library_ns", lib_ns as f64),
                ("power_of_two_ns", fast_ns),
            ]);
            out.push(f);
        }
        out
    }
}

/// Lengths with their factors: "16096 (2^5 × 503)", "1021 × 1021 (prime, prime)".
fn lengths_text(lengths: &[u64]) -> String {
    let dims = lengths
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" × ");
    let factors = lengths
        .iter()
        .map(|&n| match crate::fft::prime_factors(n).as_slice() {
            [p] if *p == n => "prime".to_string(),
            _ => crate::fft::factors_text(n),
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!("{dims} ({factors})")
}

#[cfg(test)]
mod tests {
    use super::lengths_text;

    #[test]
    fn lengths_are_written_with_their_factors() {
        assert_eq!(lengths_text(&[16096]), "16096 (2^5 × 503)");
        assert_eq!(lengths_text(&[1021, 1021]), "1021 × 1021 (prime, prime)");
    }
}
