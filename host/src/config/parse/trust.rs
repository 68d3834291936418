//! `[fleet] trusted_keys` and `trusted_keys_file`: the public keys a deploy must be signed by.

use super::walk::{Section, Walker};
use crate::signing::{PublicKey, TrustedKeys};

/// Every key of `trusted_keys` and of the file `trusted_keys_file` names (one `ed25519:…` a
/// line; blank lines and `#` comments are skipped); each bad one reported where it stands.
pub(super) fn trusted_keys(w: &mut Walker<'_>, sec: &Section<'_, '_>) -> TrustedKeys {
    let mut keys = Vec::new();
    if let Some(items) = sec.get("trusted_keys").and_then(|f| w.array(&f)) {
        for item in &items {
            let Some(text) = w.text(item) else {
                continue;
            };
            match PublicKey::parse(&text) {
                Ok(key) => keys.push(key),
                Err(e) => w.report_at(item, e.to_string()),
            }
        }
    }
    if let Some(f) = sec.get("trusted_keys_file")
        && let Some(path) = w.path(&f)
    {
        match std::fs::read_to_string(&path) {
            Err(e) => w.report_at(&f, format!("cannot read {}: {e}", path.display())),
            Ok(text) => {
                let before = keys.len();
                for (i, line) in text.lines().enumerate() {
                    let line = line.trim();
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    match PublicKey::parse(line) {
                        Ok(key) => keys.push(key),
                        Err(e) => {
                            w.report_at(&f, format!("{} line {}: {e}", path.display(), i + 1))
                        }
                    }
                }
                if keys.len() == before {
                    w.report_at(&f, format!("{} holds no key", path.display()));
                }
            }
        }
    }
    TrustedKeys::new(keys)
}
