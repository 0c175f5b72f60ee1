//! The remote-write 1.0 bytes of a vLLM-shaped fleet ([`super::fleet`]): pre-encoded
//! `TimeSeries` labels, one-sample `TimeSeries`, the batches Prometheus 2.42's queue cuts
//! ([`Payloads`]) and snappy block compression. A child of `vllm_shape.rs`, included with it.

use super::{SAMPLES_PER_BATCH, SeriesTemplate, fleet};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A series' `TimeSeries.labels` fields (field 1, each a `Label{name=1, value=2}`), pre-encoded.
pub(super) fn encode_labels(labels: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in labels {
        let len = 2 + name.len() + value.len() + varint_len(name.len()) + varint_len(value.len());
        out.push(0x0a);
        varint(&mut out, len as u64);
        out.push(0x0a);
        varint(&mut out, name.len() as u64);
        out.extend_from_slice(name.as_bytes());
        out.push(0x12);
        varint(&mut out, value.len() as u64);
        out.extend_from_slice(value.as_bytes());
    }
    out
}

fn varint_len(v: usize) -> usize {
    let mut n = 1;
    let mut v = v >> 7;
    while v > 0 {
        n += 1;
        v >>= 7;
    }
    n
}

/// Appends one `WriteRequest.timeseries` entry (field 1) holding `labels` (pre-encoded) and one
/// sample (`value` as fixed64 double, `ts_ms` as int64 varint).
pub(super) fn push_timeseries(out: &mut Vec<u8>, labels: &[u8], value: f64, ts_ms: i64) {
    let mut sample = [0u8; 2 + 8 + 11];
    sample[0] = 0x09;
    sample[1..9].copy_from_slice(&value.to_bits().to_le_bytes());
    sample[9] = 0x10;
    let mut ts = Vec::with_capacity(10);
    varint(&mut ts, ts_ms as u64);
    sample[10..10 + ts.len()].copy_from_slice(&ts);
    let sample_len = 10 + ts.len();
    let series_len = labels.len() + 1 + varint_len(sample_len) + sample_len;
    out.push(0x0a);
    varint(out, series_len as u64);
    out.extend_from_slice(labels);
    out.push(0x12);
    varint(out, sample_len as u64);
    out.extend_from_slice(&sample[..sample_len]);
}

/// A fleet ready to be cut into requests: templates, their encoded labels and their shard.
pub(crate) struct Payloads {
    /// The series.
    pub templates: Vec<SeriesTemplate>,
    encoded: Vec<Vec<u8>>,
    /// Series indices per shard, in fleet order.
    shards: Vec<Vec<usize>>,
    /// First timestamp (scrape 0; scrape `k` is at `t0_ms + k * step_ms`).
    pub t0_ms: i64,
    /// Scrape interval, ms.
    pub step_ms: i64,
}

impl Payloads {
    /// Prepares `pods` × `engines` with `shards` remote-write shards.
    pub(crate) fn new(
        pods: usize,
        engines: usize,
        shards: usize,
        t0_ms: i64,
        step_ms: i64,
    ) -> Payloads {
        let templates = fleet(pods, engines);
        let encoded = templates.iter().map(|t| encode_labels(&t.labels)).collect();
        let mut shard_of = vec![Vec::new(); shards.max(1)];
        for (i, t) in templates.iter().enumerate() {
            // FNV-1a over the label text: a fixed, even spread, like Prometheus' label-set hash.
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for (n, v) in &t.labels {
                for b in n.bytes().chain([0xff]).chain(v.bytes()).chain([0xff]) {
                    h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
                }
            }
            shard_of[(h % shards.max(1) as u64) as usize].push(i);
        }
        Payloads {
            templates,
            encoded,
            shards: shard_of,
            t0_ms,
            step_ms,
        }
    }

    /// Number of series.
    pub(crate) fn series(&self) -> usize {
        self.templates.len()
    }

    /// The uncompressed `WriteRequest` bodies of scrapes `first..first + count`, cut per shard into
    /// [`SAMPLES_PER_BATCH`]-sample requests (a shard's tail joins its next scrape, as a queue does),
    /// shards interleaved round-robin. Calls `emit` with each body and its sample count, in send order.
    pub(crate) fn for_each_request(
        &self,
        first: u64,
        count: u64,
        mut emit: impl FnMut(&[u8], usize),
    ) {
        let mut pending: Vec<(Vec<u8>, usize)> =
            vec![(Vec::with_capacity(160 * 1024), 0); self.shards.len()];
        let mut ready: Vec<Vec<(Vec<u8>, usize)>> = vec![Vec::new(); self.shards.len()];
        for k in first..first + count {
            let ts = self.t0_ms + k as i64 * self.step_ms;
            for (s, members) in self.shards.iter().enumerate() {
                for &i in members {
                    let (buf, n) = &mut pending[s];
                    push_timeseries(buf, &self.encoded[i], self.templates[i].value_at(k), ts);
                    *n += 1;
                    if *n == SAMPLES_PER_BATCH {
                        ready[s].push((
                            std::mem::replace(buf, Vec::with_capacity(160 * 1024)),
                            SAMPLES_PER_BATCH,
                        ));
                        *n = 0;
                    }
                }
            }
            // Round-robin over the shards' finished requests of this scrape.
            let most = ready.iter().map(Vec::len).max().unwrap_or(0);
            for j in 0..most {
                for shard in &ready {
                    if let Some((body, n)) = shard.get(j) {
                        emit(body, *n);
                    }
                }
            }
            ready.iter_mut().for_each(Vec::clear);
        }
        for (buf, n) in pending {
            if n > 0 {
                emit(&buf, n);
            }
        }
    }
}

/// Snappy block-compresses a body (the remote-write `Content-Encoding: snappy`).
pub(crate) fn compress(raw: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(raw)
        .expect("body under 4 GiB")
}
