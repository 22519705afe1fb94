//! The sidecar files of a merged bundle (format 1.3): one stage's per-step
//! series of every rank of one configuration, binary, so a job of 16,384
//! ranks keeps its steps out of the JSON the viewer opens first and the
//! viewer reads them only when it draws them.
//!
//! Layout (little-endian):
//! - 8 bytes magic `SSRSTEP\0`, u16 major, u16 minor ([`SIDECAR_MAJOR`],
//!   [`SIDECAR_MINOR`]), u32 length of the header;
//! - the header, JSON ([`Header`]), padded with spaces to a multiple of 4;
//! - per run of the header, in order: `ranks` u32 × n, `lens` u32 × n (each
//!   rank's step count), then n × `steps` u32 values, row by row (a rank's
//!   row padded with 0 after its `lens`), each value × `unit_ns` = ns.
//!
//! The header holds the FNV-1a 64 of the data; [`decode`] checks it, the
//! lengths and the version, each error saying where and what was expected.

use serde::{Deserialize, Serialize};

use crate::format::Phase;

pub const MAGIC: &[u8; 8] = b"SSRSTEP\0";
pub const SIDECAR_MAJOR: u16 = 1;
pub const SIDECAR_MINOR: u16 = 0;

/// One stage of one configuration, every rank's series per run.
#[derive(Debug, Clone, PartialEq)]
pub struct StageSteps {
    /// The merged bundle's id, held against the bundle on read.
    pub bundle_id: String,
    pub experiment: String,
    pub configuration: String,
    /// `next_wait`, `transfer`, `compute` or `comm`.
    pub stage: String,
    pub runs: Vec<RunSteps>,
}

/// Every rank's series of one diagnostic (repeat, epoch).
#[derive(Debug, Clone, PartialEq)]
pub struct RunSteps {
    pub repeat: u32,
    pub epoch: u32,
    pub phase: Phase,
    /// Ascending.
    pub ranks: Vec<u32>,
    /// Each rank's step count (≤ `steps`).
    pub lens: Vec<u32>,
    /// The row length: the largest of `lens`.
    pub steps: u32,
    /// ns = value × `unit_ns` (1 unless a step took over 4.29 s).
    pub unit_ns: u64,
    /// `ranks.len() × steps`, row by row.
    pub values: Vec<u32>,
}

impl RunSteps {
    /// Make one from each rank's series in ns (rows of any lengths).
    pub fn from_rows(repeat: u32, epoch: u32, phase: Phase, rows: &[(u32, &[u64])]) -> Self {
        let steps = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        let max = rows.iter().flat_map(|r| r.1.iter()).copied().max();
        let mut unit_ns = 1u64;
        while max.unwrap_or(0) / unit_ns > u64::from(u32::MAX) {
            unit_ns *= 10;
        }
        let mut values = vec![0u32; rows.len() * steps];
        for (i, (_, row)) in rows.iter().enumerate() {
            let out = &mut values[i * steps..i * steps + row.len()];
            if unit_ns == 1 {
                // Every value fits: no division.
                out.iter_mut().zip(*row).for_each(|(o, &v)| *o = v as u32);
            } else {
                out.iter_mut().zip(*row).for_each(|(o, &v)| {
                    *o = (v.saturating_add(unit_ns / 2) / unit_ns).min(u32::MAX.into()) as u32
                });
            }
        }
        RunSteps {
            repeat,
            epoch,
            phase,
            ranks: rows.iter().map(|r| r.0).collect(),
            lens: rows.iter().map(|r| r.1.len() as u32).collect(),
            steps: steps as u32,
            unit_ns,
            values,
        }
    }

    /// Rank index `i`'s series in ns.
    pub fn row_ns(&self, i: usize) -> impl Iterator<Item = u64> + '_ {
        let s = self.steps as usize;
        let len = self.lens.get(i).copied().unwrap_or(0) as usize;
        self.values[i * s..i * s + len]
            .iter()
            .map(|&v| u64::from(v) * self.unit_ns)
    }
}

/// The JSON header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub bundle_id: String,
    pub experiment: String,
    pub configuration: String,
    pub stage: String,
    pub runs: Vec<RunHeader>,
    /// FNV-1a 64 of every byte after the header, 16 hex digits.
    pub data_fnv64: String,
}

/// One run's place in the data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunHeader {
    pub repeat: u32,
    pub epoch: u32,
    pub phase: Phase,
    pub ranks: u32,
    pub steps: u32,
    pub unit_ns: u64,
}

/// Why a sidecar cannot be read; each names what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SidecarError {
    #[error("not a stallscope sidecar: the file does not start with SSRSTEP\\0")]
    Magic,
    #[error("sidecar format {major}.{minor}; this build reads {SIDECAR_MAJOR}.x")]
    Version { major: u16, minor: u16 },
    #[error("the file ends at byte {len}; expected at least {expected} bytes ({what})")]
    Short {
        len: usize,
        expected: usize,
        what: String,
    },
    #[error("header: {0}")]
    Header(String),
    #[error("data checksum {found}; the header says {expected}: the file is damaged")]
    Checksum { found: String, expected: String },
    #[error("{extra} bytes after the last run; expected the file to end there")]
    Trailing { extra: usize },
    #[error("run {run}: {what}")]
    Run { run: usize, what: String },
    #[error("{what}: found {found}; the bundle says {expected}")]
    NotTheBundles {
        what: &'static str,
        found: String,
        expected: String,
    },
}

/// FNV-1a 64 of `bytes`.
pub fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// 16 lowercase hex digits.
pub fn hex64(v: u64) -> String {
    format!("{v:016x}")
}

fn put_u32s(out: &mut Vec<u8>, v: &[u32]) {
    let at = out.len();
    out.resize(at + v.len() * 4, 0);
    for (o, x) in out[at..].chunks_exact_mut(4).zip(v) {
        o.copy_from_slice(&x.to_le_bytes());
    }
}

/// The key of the header's last field, as its JSON has it.
const DATA_FNV64_KEY: &[u8] = b"\"data_fnv64\":\"";

/// The file's bytes. The header's length does not depend on the data's
/// checksum (always 16 hex digits), so the header is written with a
/// placeholder, the data straight after it, and the checksum then put in
/// its place: the data is written once, into the file's own buffer.
pub fn encode(s: &StageSteps) -> Vec<u8> {
    let header = Header {
        bundle_id: s.bundle_id.clone(),
        experiment: s.experiment.clone(),
        configuration: s.configuration.clone(),
        stage: s.stage.clone(),
        runs: s
            .runs
            .iter()
            .map(|r| RunHeader {
                repeat: r.repeat,
                epoch: r.epoch,
                phase: r.phase,
                ranks: r.ranks.len() as u32,
                steps: r.steps,
                unit_ns: r.unit_ns,
            })
            .collect(),
        data_fnv64: hex64(0),
    };
    let mut h = serde_json::to_vec(&header).expect("a header serializes");
    while !h.len().is_multiple_of(4) {
        h.push(b' ');
    }
    let sum_at = h
        .windows(DATA_FNV64_KEY.len())
        .rposition(|w| w == DATA_FNV64_KEY)
        .expect("the header names its checksum")
        + DATA_FNV64_KEY.len()
        + 16;
    let data: usize = s
        .runs
        .iter()
        .map(|r| 4 * (r.ranks.len() + r.lens.len() + r.values.len()))
        .sum();
    let mut out = Vec::with_capacity(16 + h.len() + data);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&SIDECAR_MAJOR.to_le_bytes());
    out.extend_from_slice(&SIDECAR_MINOR.to_le_bytes());
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(&h);
    let start = out.len();
    for r in &s.runs {
        put_u32s(&mut out, &r.ranks);
        put_u32s(&mut out, &r.lens);
        put_u32s(&mut out, &r.values);
    }
    let sum = hex64(fnv64(&out[start..]));
    out[sum_at..sum_at + 16].copy_from_slice(sum.as_bytes());
    out
}

fn take<'a>(b: &'a [u8], at: &mut usize, n: usize, what: &str) -> Result<&'a [u8], SidecarError> {
    let end = at.checked_add(n).filter(|&e| e <= b.len());
    let Some(end) = end else {
        return Err(SidecarError::Short {
            len: b.len(),
            expected: at.saturating_add(n),
            what: what.to_string(),
        });
    };
    let out = &b[*at..end];
    *at = end;
    Ok(out)
}

fn u32s(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// [`decode`] a sidecar the merged bundle names, first holding its size and
/// whole-file checksum to the bundle's record, then its bundle id.
pub fn decode_for(
    bytes: &[u8],
    record: &crate::format::RankSidecar,
    bundle_id: &str,
) -> Result<StageSteps, SidecarError> {
    let mismatch = |what, found: String, expected: String| SidecarError::NotTheBundles {
        what,
        found,
        expected,
    };
    if bytes.len() as u64 != record.bytes {
        let (found, expected) = (bytes.len().to_string(), record.bytes.to_string());
        return Err(mismatch("size in bytes", found, expected));
    }
    let sum = hex64(fnv64(bytes));
    if sum != record.fnv64 {
        return Err(mismatch("FNV-1a 64", sum, record.fnv64.clone()));
    }
    let s = decode(bytes)?;
    if s.bundle_id != bundle_id || s.stage != record.stage {
        let found = format!("bundle {:?} stage {:?}", s.bundle_id, s.stage);
        let expected = format!("bundle {bundle_id:?} stage {:?}", record.stage);
        return Err(mismatch("the file's bundle and stage", found, expected));
    }
    Ok(s)
}

/// Read a sidecar's bytes, checking magic, version, lengths and checksum.
pub fn decode(bytes: &[u8]) -> Result<StageSteps, SidecarError> {
    let mut at = 0;
    if take(bytes, &mut at, 8, "the magic")? != MAGIC {
        return Err(SidecarError::Magic);
    }
    let fixed = take(bytes, &mut at, 8, "the version and header length")?;
    let major = u16::from_le_bytes([fixed[0], fixed[1]]);
    let minor = u16::from_le_bytes([fixed[2], fixed[3]]);
    if major != SIDECAR_MAJOR {
        return Err(SidecarError::Version { major, minor });
    }
    let hlen = u32::from_le_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]) as usize;
    let h = take(bytes, &mut at, hlen, "the header")?;
    let header: Header =
        serde_json::from_slice(h).map_err(|e| SidecarError::Header(e.to_string()))?;
    let found = hex64(fnv64(&bytes[at..]));
    if found != header.data_fnv64 {
        return Err(SidecarError::Checksum {
            found,
            expected: header.data_fnv64,
        });
    }
    let mut runs = Vec::with_capacity(header.runs.len());
    for (i, r) in header.runs.iter().enumerate() {
        runs.push(decode_run(bytes, &mut at, i, r)?);
    }
    if at != bytes.len() {
        return Err(SidecarError::Trailing {
            extra: bytes.len() - at,
        });
    }
    Ok(StageSteps {
        bundle_id: header.bundle_id,
        experiment: header.experiment,
        configuration: header.configuration,
        stage: header.stage,
        runs,
    })
}

fn decode_run(
    bytes: &[u8],
    at: &mut usize,
    i: usize,
    r: &RunHeader,
) -> Result<RunSteps, SidecarError> {
    let n = r.ranks as usize;
    let bad = |what: String| SidecarError::Run { run: i, what };
    let cells = n
        .checked_mul(r.steps as usize)
        .and_then(|c| c.checked_mul(4))
        .ok_or_else(|| bad("ranks × steps overflows".into()))?;
    let ranks = u32s(take(bytes, at, n * 4, &format!("run {i}'s ranks"))?);
    let lens = u32s(take(bytes, at, n * 4, &format!("run {i}'s step counts"))?);
    let values = u32s(take(bytes, at, cells, &format!("run {i}'s values"))?);
    if r.unit_ns == 0 {
        return Err(bad("unit_ns is 0; expected 1 or a power of 10".into()));
    }
    if let Some(w) = ranks.windows(2).find(|w| w[0] >= w[1]) {
        return Err(bad(format!(
            "rank {} after rank {}; expected ascending ranks",
            w[1], w[0]
        )));
    }
    if let Some((k, l)) = lens.iter().enumerate().find(|(_, l)| **l > r.steps) {
        return Err(bad(format!(
            "rank {} has {l} steps; expected at most the row length {}",
            ranks[k], r.steps
        )));
    }
    Ok(RunSteps {
        repeat: r.repeat,
        epoch: r.epoch,
        phase: r.phase,
        ranks,
        lens,
        steps: r.steps,
        unit_ns: r.unit_ns,
        values,
    })
}
