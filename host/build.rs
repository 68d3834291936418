//! Link settings for the host's binaries (the shardhost CLI, tests and benches).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    // Relative relocations packed (DT_RELR): a position-independent binary otherwise carries
    // ~1.7 MB of them that the loader reads, page by page, at every start.
    if target.ends_with("linux-gnu") {
        println!("cargo:rustc-link-arg=-Wl,-z,pack-relative-relocs");
    }
}
