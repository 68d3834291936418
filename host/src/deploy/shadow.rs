//! Shadows through the deployer: set one (validated as a deploy validates), drop it, or promote
//! it (a deploy of its bytes). With a fleet each of these goes through the lease table's shadow
//! row first, and every instance follows the row ([`Deployer::follow_shadow`]).

use std::sync::Arc;

use super::{DeployError, Deployed, Deployer, Trial};
use crate::effects::HttpAnswer;
use crate::fleet::Sign;
use crate::handler::HandlerFactory;
use crate::shadow::Shadow;
use crate::status::fleet::Refusal;
use crate::version::short_version;

/// A shadow set: the candidate's version, the current one, and the shadow it replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowSet {
    pub shadow: String,
    pub current: String,
    pub replaced: Option<String>,
}

impl Deployer {
    /// Validates `bytes` under `subscription`'s limits and grants and, only if they pass, runs
    /// them in shadow of its current version from each shard's next batch on, their unsent
    /// HTTP requests answered `http_answer` (none: 503).
    pub async fn shadow(
        &self,
        subscription: &str,
        bytes: &[u8],
        http_answer: Option<HttpAnswer>,
        origin: &str,
    ) -> Result<ShadowSet, DeployError> {
        let target = self.target(subscription)?;
        if let Some(link) = &self.fleet {
            // Through the admin API a shadow is not signed: a fleet with trusted keys refuses
            // it before anything of the bytes runs (sign it with `--config … --sign-key`).
            let version = crate::version::version_of(bytes);
            link.fleet
                .signs_trial(subscription, "a shadow", &version, &Sign::No)?;
        }
        let _one_at_a_time = target.swapping.lock().await;
        let component = self.validate(subscription, target, bytes, origin).await?;
        let factory = component as Arc<dyn HandlerFactory>;
        let mut shadow = Shadow::new(factory, bytes.to_vec()).answering(http_answer.clone());
        if let Some(link) = &self.fleet {
            let by = format!("{} ({origin})", link.owner);
            let row = link
                .fleet
                .set_shadow(subscription, bytes, http_answer.as_ref(), &by, &Sign::No)
                .await?;
            shadow = shadow.of_fleet(&row.shadow_id);
        }
        let shadow = Arc::new(shadow);
        let set = ShadowSet {
            shadow: shadow.version(),
            current: target.slot.version(),
            replaced: target.slot.set_shadow(Some(shadow)).map(|s| s.version()),
        };
        tracing::info!(
            subscription,
            shadow = short_version(&set.shadow),
            current = short_version(&set.current),
            http_answer = http_answer.as_ref().map(HttpAnswer::describe),
            "a shadow runs after the current version on every batch: compared, never settled"
        );
        Ok(set)
    }

    /// Drops `subscription`'s shadow; answers its version.
    pub async fn shadow_off(&self, subscription: &str) -> Result<String, DeployError> {
        let target = self.target(subscription)?;
        let _one_at_a_time = target.swapping.lock().await;
        if let Some(link) = &self.fleet {
            let by = format!("{} (shadow off)", link.owner);
            link.fleet.shadow_off(subscription, &by).await?;
        }
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
        if let Some(link) = &self.fleet {
            let by = format!("{} (shadow promoted)", link.owner);
            link.fleet.shadow_off(subscription, &by).await?;
        }
        if let (_, Some(now)) = target.slot.shadow()
            && Arc::ptr_eq(&now, &shadow)
        {
            target.slot.set_shadow(None);
        }
        Ok(deployed)
    }
}

impl Deployer {
    /// Follows the fleet's shadow row of `subscription`: runs the shadow it names while it is
    /// on (fetched, checked and validated as a deploy), drops a fleet shadow once it is off.
    pub async fn follow_shadow(&self, fleet: &crate::fleet::Fleet, subscription: &str) {
        let Ok(target) = self.target(subscription) else {
            return;
        };
        let row = match fleet.shadow(subscription).await {
            Ok(row) => row.map(|(_, s)| s).filter(|s| s.on),
            Err(e) => {
                tracing::warn!(subscription, "cannot follow the fleet's shadow: {e}");
                return;
            }
        };
        let (_, have) = target.slot.shadow();
        let have_id = have.as_ref().and_then(|s| s.fleet_id.clone());
        let Some(row) = row else {
            self.trial_refused(target, Trial::Shadow, None);
            if have_id.is_some() {
                target.slot.set_shadow(None);
                tracing::info!(subscription, "the fleet's shadow was dropped");
            }
            return;
        };
        let refused_before = {
            let refused = target.shadow_refused.lock().expect("deployer poisoned");
            refused.as_deref() == Some(row.shadow_id.as_str())
        };
        if have_id.as_deref() == Some(row.shadow_id.as_str()) || refused_before {
            return;
        }
        let origin = format!("the fleet's shadow {}", short_version(&row.version));
        // Trusted before a byte of it is fetched: an unsigned shadow is never loaded.
        if let Err(e) = fleet.trust_shadow(subscription, &row) {
            tracing::error!(subscription, "{origin} does not run here: {e}");
            *target.shadow_refused.lock().expect("deployer poisoned") = Some(row.shadow_id.clone());
            let refusal = Refusal {
                version: row.version.clone(),
                generation: 0,
                error: e.to_string(),
            };
            self.trial_refused(target, Trial::Shadow, Some(refusal));
            if have_id.is_some() {
                // The row no longer names the shadow running here.
                target.slot.set_shadow(None);
            }
            return;
        }
        let bytes = match fleet.fetch(subscription, &row.component()).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(subscription, "cannot fetch {origin}: {e}");
                return;
            }
        };
        let _one_at_a_time = target.swapping.lock().await;
        match self.validate(subscription, target, &bytes, &origin).await {
            Ok(component) => {
                let factory = component as Arc<dyn HandlerFactory>;
                let shadow = Shadow::new(factory, bytes)
                    .answering(row.http_answer.clone())
                    .of_fleet(&row.shadow_id);
                target.slot.set_shadow(Some(Arc::new(shadow)));
                self.trial_refused(target, Trial::Shadow, None);
                tracing::info!(subscription, "{origin} runs here too");
            }
            Err(e) => {
                tracing::error!(subscription, "{origin} does not run here: {e}");
                *target.shadow_refused.lock().expect("deployer poisoned") =
                    Some(row.shadow_id.clone());
            }
        }
    }
}
