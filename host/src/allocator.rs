//! How the host asks the C allocator (glibc's malloc) to hand memory back.
//!
//! A read of 10 000 records arrives as one response body of up to ~14 MB and is parsed into
//! records of a few hundred bytes each; both are freed once the records are settled. glibc
//! serves blocks of 128 KiB and more with their own `mmap`, which `free` gives straight back to
//! the kernel, but after the first such free it raises that threshold (up to 32 MiB), so the
//! next bodies land in the heap, where freed memory stays resident. Keeping the threshold at
//! 128 KiB keeps a host's resident memory at what its shards hold now, not what they once held
//! (4 shards of kinesis-mock: peak RSS 25.0 → 21.8 MiB, BENCHMARKS.md).

/// Fixes glibc's mmap threshold at 128 KiB, unless the user tuned malloc through the
/// environment (`GLIBC_TUNABLES` or `MALLOC_MMAP_THRESHOLD_`). No-op on other C libraries.
pub fn release_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tuned = std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
            || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("mmap_threshold"));
        if !tuned {
            // SAFETY: mallopt only sets an allocator parameter; any value is valid for it.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
            }
        }
    }
}
