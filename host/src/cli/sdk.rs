//! Where the guest SDKs are (`guest-sdk/` of a shardhost checkout): what `new` points a project
//! at and what `build` runs the Python and JavaScript build tools from.

use std::path::{Path, PathBuf};

/// The SDK directory: `$SHARDHOST_SDK`; else a `guest-sdk/` next to an ancestor of this
/// executable (a checkout's `target/…/shardhost`); else the one this binary was built from.
pub fn locate() -> Result<PathBuf, SdkError> {
    if let Some(dir) = std::env::var_os("SHARDHOST_SDK") {
        let dir = PathBuf::from(dir);
        return if is_sdk(&dir) {
            Ok(absolute(&dir))
        } else {
            Err(SdkError::NotAnSdk(dir))
        };
    }
    let exe = std::env::current_exe().ok();
    let from_exe = exe
        .iter()
        .flat_map(|e| e.ancestors())
        .map(|a| a.join("guest-sdk"))
        .find(|d| is_sdk(d));
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let checkout = manifest_dir.parent().unwrap_or(manifest_dir);
    let built_from = checkout.join("guest-sdk");
    from_exe
        .or_else(|| is_sdk(&built_from).then_some(built_from))
        .map(|d| absolute(&d))
        .ok_or_else(|| SdkError::NotFound(checkout.to_owned()))
}

/// The SDKs' directory of a checkout: their build tools, and beside it the `wit/` they build
/// every component's world from.
fn is_sdk(dir: &Path) -> bool {
    dir.join("Cargo.toml").is_file()
        && dir.join("python/componentize").is_file()
        && dir.join("js/componentize").is_file()
        && dir.join("../wit/handler.wit").is_file()
}

fn absolute(dir: &Path) -> PathBuf {
    dir.canonicalize().unwrap_or_else(|_| dir.to_owned())
}

/// The SDKs cannot be found.
#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    #[error(
        "SHARDHOST_SDK={}: not the guest-sdk directory of a shardhost checkout (which holds \
         Cargo.toml, python/componentize and js/componentize, beside wit/handler.wit)",
        .0.display()
    )]
    NotAnSdk(PathBuf),
    /// Neither beside the executable nor where it was built (the checkout moved, or is gone).
    #[error(
        "cannot find the guest SDKs: this shardhost was built in the checkout {}, which \
         has no guest-sdk/ any more (moved or deleted?): set SHARDHOST_SDK to the guest-sdk \
         directory of a shardhost checkout (export SHARDHOST_SDK=/path/to/shardhost/guest-sdk), \
         or run that checkout's scripts/install again",
        .0.display()
    )]
    NotFound(PathBuf),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_checkout_is_named_with_what_to_set() {
        let said = SdkError::NotFound(PathBuf::from("/old/shardhost")).to_string();
        assert!(
            said.contains("built in the checkout /old/shardhost"),
            "{said}"
        );
        assert!(said.contains("SHARDHOST_SDK"), "{said}");
        assert!(!said.contains("~/src/shardhost"), "{said}");
    }
}
