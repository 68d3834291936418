//! Shadows through the deployer: set one (validated as a deploy validates), drop it, or promote
//! it (a deploy of its bytes, fleet-wide with a fleet). A shadow is this instance's: with a
//! fleet, each instance runs the shadow it was given.

use std::sync::Arc;

use super::{DeployError, Deployed, Deployer};
use crate::fleet::Sign;
use crate::handler::HandlerFactory;
use crate::shadow::Shadow;
use crate::wasm::short_version;

/// A shadow set: the candidate's version, the current one, and the shadow it replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowSet {
    pub shadow: String,
    pub current: String,
    pub replaced: Option<String>,
}

impl Deployer {
    /// Validates `bytes` under `subscription`'s limits and grants and, only if they pass, runs
    /// them in shadow of its current version from each shard's next batch on.
    pub async fn shadow(
        &self,
        subscription: &str,
        bytes: &[u8],
        origin: &str,
    ) -> Result<ShadowSet, DeployError> {
        let target = self.target(subscription)?;
        let _one_at_a_time = target.swapping.lock().await;
        let component = self.validate(subscription, target, bytes, origin).await?;
        let factory = component as Arc<dyn HandlerFactory>;
        let shadow = Arc::new(Shadow::new(factory, bytes.to_vec()));
        let set = ShadowSet {
            shadow: shadow.version(),
            current: target.slot.version(),
            replaced: target.slot.set_shadow(Some(shadow)).map(|s| s.version()),
        };
        tracing::info!(
            subscription,
            shadow = short_version(&set.shadow),
            current = short_version(&set.current),
            "a shadow runs after the current version on every batch: compared, never settled"
        );
        Ok(set)
    }

    /// Drops `subscription`'s shadow; answers its version.
    pub async fn shadow_off(&self, subscription: &str) -> Result<String, DeployError> {
        let target = self.target(subscription)?;
        let _one_at_a_time = target.swapping.lock().await;
        let dropped = target
            .slot
            .set_shadow(None)
            .ok_or_else(|| DeployError::NoShadow(subscription.to_owned()))?;
        tracing::info!(
            subscription,
            shadow = short_version(&dropped.version()),
            "shadow dropped"
        );
        Ok(dropped.version())
    }

    /// Makes `subscription`'s shadow its current version, exactly as a deploy of its bytes
    /// (fleet-wide with a fleet, signed as `sign` says), and drops the shadow.
    pub async fn promote(
        &self,
        subscription: &str,
        sign: &Sign<'_>,
    ) -> Result<Deployed, DeployError> {
        let target = self.target(subscription)?;
        let (_, shadow) = target.slot.shadow();
        let shadow = shadow.ok_or_else(|| DeployError::NoShadow(subscription.to_owned()))?;
        let origin = format!("promote of shadow {}", short_version(&shadow.version()));
        let deployed = self
            .deploy(subscription, &shadow.bytes, &origin, sign)
            .await?;
        // Dropped only if it is still the shadow promoted (not one set meanwhile).
        let _one_at_a_time = target.swapping.lock().await;
        if let (_, Some(now)) = target.slot.shadow()
            && Arc::ptr_eq(&now, &shadow)
        {
            target.slot.set_shadow(None);
        }
        Ok(deployed)
    }
}
