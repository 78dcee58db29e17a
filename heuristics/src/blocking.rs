//! Which host calls block: copies to or from pageable memory (their launch calls wait like a
//! synchronize) and each thread's synchronising runtime calls, found once per analysis for the
//! idle engine, the starved-kernel pass and launch_bound.

use crate::names::is_sync_call;
use rustc_hash::{FxHashMap, FxHashSet};
use tracehound_parsers::Trace;

/// The correlation ids of copies to or from pageable memory: their launch calls block the host
/// like a synchronize.
pub(crate) fn pageable_copy_launches(t: &Trace) -> FxHashSet<u64> {
    t.gpu_ops
        .iter()
        .filter(|o| o.is_pageable_copy())
        .map(|o| o.correlation)
        .filter(|&c| c != 0)
        .collect()
}

/// Each thread's runtime and driver calls (only they can block) as the drain search reads
/// them: their starts side by side, and which of them block. Built once per analysis
/// ([`crate::scope::Scope::blocking_calls`]) in one pass over the calls; the search then reads a span only
/// when a blocking call is among the last few (a read of a span is a cache miss, and the
/// starved pass asks once per starved kernel).
pub(crate) struct BlockingCalls<'t> {
    pub(crate) threads: FxHashMap<(i64, i64), ThreadCalls<'t>>,
}

pub(crate) struct ThreadCalls<'t> {
    /// The thread's calls (span indices), sorted by start.
    pub(crate) calls: &'t [u32],
    /// Their starts.
    pub(crate) starts: Vec<i64>,
    /// Positions in `calls` of the blocking ones, ascending.
    pub(crate) blocking: Vec<u32>,
}

impl<'t> BlockingCalls<'t> {
    pub(crate) fn new(t: &'t Trace, pageable: &FxHashSet<u64>) -> Self {
        // Per name id, whether it synchronises: tested once per name (a trace has a few
        // hundred call names).
        let mut sync_names: FxHashMap<u32, bool> = FxHashMap::default();
        let threads = t
            .index
            .calls_by_thread
            .iter()
            .map(|(key, calls)| {
                let mut starts = Vec::with_capacity(calls.len());
                let mut blocking = Vec::new();
                for (k, &i) in calls.iter().enumerate() {
                    let s = &t.host_spans[i as usize];
                    starts.push(s.start);
                    let sync = *sync_names
                        .entry(s.name)
                        .or_insert_with(|| is_sync_call(t.api_name(s.name)));
                    if sync || (s.correlation() != 0 && pageable.contains(&s.correlation())) {
                        blocking.push(k as u32);
                    }
                }
                (
                    *key,
                    ThreadCalls {
                        calls,
                        starts,
                        blocking,
                    },
                )
            })
            .collect();
        BlockingCalls { threads }
    }
}
