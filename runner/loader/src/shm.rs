//! POSIX shared-memory segments (`shm_open` + `mmap`) through which worker
//! processes hand batches to the runner: a progress word, then a ring of
//! fixed-size slots, one batch per slot. Only indices and slot numbers
//! travel over the control pipe, never the batch bytes.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapMut;

use super::pool::BufferPool;

/// Every segment's name starts with this (visible under `/dev/shm` while it
/// is linked), so tests and people can check none is left behind.
pub const SEGMENT_PREFIX: &str = "stallscope-loader-";

/// Bytes before the first slot (the progress word, padded to a cache line).
const HEADER: usize = 64;

/// One mapped segment.
pub(crate) struct Segment {
    name: String,
    map: MmapMut,
    linked: bool,
}

/// Bytes of one slot for a batch of `batch_size` samples of `per_sample`
/// floats: count, sample ids, labels, inputs; rounded up to 64.
pub(crate) fn slot_bytes(batch_size: usize, per_sample: usize) -> usize {
    let raw = 8 + batch_size * 16 + batch_size * per_sample * 4;
    raw.div_ceil(64) * 64
}

pub(crate) fn segment_len(slots: usize, slot_bytes: usize) -> usize {
    HEADER + slots * slot_bytes
}

fn c_name(name: &str) -> io::Result<CString> {
    CString::new(format!("/{name}")).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

impl Segment {
    /// Create a new segment of `len` bytes (fails if the name exists).
    pub(crate) fn create(name: String, len: usize) -> io::Result<Segment> {
        let cname = c_name(&name)?;
        // SAFETY: a valid NUL-terminated name; the fd is owned by `File` below.
        let fd = unsafe {
            libc::shm_open(
                cname.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o600,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just opened and is not owned elsewhere.
        let file = unsafe { File::from_raw_fd(fd) };
        let mapped = file.set_len(len as u64).and_then(|()| {
            // SAFETY: the file is a shared-memory object only this loader uses.
            unsafe { MmapMut::map_mut(&file) }
        });
        match mapped {
            Ok(map) => Ok(Segment {
                name,
                map,
                linked: true,
            }),
            Err(e) => {
                // SAFETY: a valid NUL-terminated name.
                unsafe { libc::shm_unlink(cname.as_ptr()) };
                Err(e)
            }
        }
    }

    /// Open an existing segment (in the worker process).
    pub(crate) fn open(name: &str, len: usize) -> io::Result<Segment> {
        let cname = c_name(name)?;
        // SAFETY: as in `create`.
        let fd = unsafe { libc::shm_open(cname.as_ptr(), libc::O_RDWR, 0o600) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just opened and is not owned elsewhere.
        let file = unsafe { File::from_raw_fd(fd) };
        if file.metadata()?.len() < len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("segment {name} is smaller than {len} bytes"),
            ));
        }
        // SAFETY: as in `create`.
        let map = unsafe { MmapMut::map_mut(&file)? };
        Ok(Segment {
            name: name.to_string(),
            map,
            linked: false,
        })
    }

    /// Remove the name (the mapping stays valid in every process that has it).
    pub(crate) fn unlink(&mut self) {
        if self.linked {
            if let Ok(cname) = c_name(&self.name) {
                // SAFETY: a valid NUL-terminated name.
                unsafe { libc::shm_unlink(cname.as_ptr()) };
            }
            self.linked = false;
        }
    }

    /// The worker's progress word: sample index + 1 while loading, else 0.
    pub(crate) fn progress(&self) -> &AtomicU64 {
        // SAFETY: the map is at least HEADER bytes, page-aligned, and the word
        // is only accessed atomically by both processes.
        unsafe { &*(self.map.as_ptr() as *const AtomicU64) }
    }

    pub(crate) fn set_progress(&self, sample: Option<u64>) {
        self.progress()
            .store(sample.map_or(0, |s| s + 1), Ordering::Release);
    }

    pub(crate) fn loading_sample(&self) -> Option<u64> {
        self.progress().load(Ordering::Acquire).checked_sub(1)
    }

    /// Write a batch into slot `slot` (worker side).
    pub(crate) fn write_slot(
        &mut self,
        slot: usize,
        slot_bytes: usize,
        ids: &[u64],
        labels: &[i64],
        inputs: &[f32],
    ) -> io::Result<()> {
        let n = ids.len();
        let need = 8 + n * 16 + inputs.len() * 4;
        if need > slot_bytes || labels.len() != n {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a batch of {need} bytes does not fit a slot of {slot_bytes}"),
            ));
        }
        let start = HEADER + slot * slot_bytes;
        let buf = &mut self.map[start..start + slot_bytes];
        buf[..8].copy_from_slice(&(n as u64).to_ne_bytes());
        let mut at = 8;
        for v in ids {
            buf[at..at + 8].copy_from_slice(&v.to_ne_bytes());
            at += 8;
        }
        for v in labels {
            buf[at..at + 8].copy_from_slice(&v.to_ne_bytes());
            at += 8;
        }
        // SAFETY: f32 has no invalid bit patterns; the length is checked above.
        let bytes =
            unsafe { std::slice::from_raw_parts(inputs.as_ptr() as *const u8, inputs.len() * 4) };
        buf[at..at + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    /// Copy a batch out of slot `slot` (runner side): ids, labels, inputs.
    pub(crate) fn read_slot(
        &self,
        slot: usize,
        slot_bytes: usize,
        per_sample: usize,
        buffers: &BufferPool,
    ) -> io::Result<(Vec<u64>, Vec<i64>, Vec<f32>)> {
        let start = HEADER + slot * slot_bytes;
        let buf = &self.map[start..start + slot_bytes];
        let word = |at: usize| u64::from_ne_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
        let n = word(0) as usize;
        if 8 + n * 16 + n * per_sample * 4 > slot_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("slot {slot} claims {n} samples, more than fit"),
            ));
        }
        let ids = (0..n).map(|i| word(8 + i * 8)).collect();
        let labels = (0..n).map(|i| word(8 + n * 8 + i * 8) as i64).collect();
        let at = 8 + n * 16;
        let mut inputs = buffers.take(n * per_sample);
        // SAFETY: destination has exactly n * per_sample * 4 bytes.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(inputs.as_mut_ptr() as *mut u8, inputs.len() * 4)
        };
        dst.copy_from_slice(&buf[at..at + dst.len()]);
        Ok((ids, labels, inputs))
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        self.unlink();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_round_trips_through_a_slot_and_the_name_goes_away() {
        let name = format!("{SEGMENT_PREFIX}unit-{}", std::process::id());
        let sb = slot_bytes(4, 3);
        let mut seg = Segment::create(name.clone(), segment_len(2, sb)).unwrap();
        assert!(std::path::Path::new(&format!("/dev/shm/{name}")).exists());
        let other = Segment::open(&name, segment_len(2, sb)).unwrap();
        let inputs: Vec<f32> = (0..9).map(|i| i as f32 * 0.5).collect();
        seg.write_slot(1, sb, &[7, 8, 9], &[1, 0, 1], &inputs)
            .unwrap();
        let (ids, labels, got) = other.read_slot(1, sb, 3, &BufferPool::new(1)).unwrap();
        assert_eq!(ids, vec![7, 8, 9]);
        assert_eq!(labels, vec![1, 0, 1]);
        assert_eq!(got, inputs);
        seg.set_progress(Some(41));
        assert_eq!(other.loading_sample(), Some(41));
        drop(seg);
        assert!(!std::path::Path::new(&format!("/dev/shm/{name}")).exists());
    }
}
