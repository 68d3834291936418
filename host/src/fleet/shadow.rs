//! A fleet's shadow (see `fleet_table/shadow.rs`): set for every instance, dropped, read.

use super::{Fleet, FleetError, Sign, shadow_statement};
use crate::effects::HttpAnswer;
use crate::fleet_table::{FleetShadow, new_id};
use crate::lease::now_ms;
use crate::signing::SignKey;

impl Fleet {
    /// The shadow row of `subscription` and its revision; `None` when none was ever set.
    pub async fn shadow(
        &self,
        subscription: &str,
    ) -> Result<Option<(u64, FleetShadow)>, FleetError> {
        self.read(1);
        let read = self.table.fleet_shadow(&self.service, subscription).await?;
        match (read.revision, read.doc) {
            (Some(revision), Some(Ok(shadow))) => Ok(Some((revision, shadow))),
            (_, Some(Err(why))) => Err(FleetError::BadRollout {
                subscription: subscription.to_owned(),
                why: format!("the shadow row: {why}"),
            }),
            _ => Ok(None),
        }
    }

    /// Makes `bytes` (validated by the caller) the shadow every instance runs, replacing any,
    /// its unsent HTTP requests answered `http_answer` (none: 503); signed with `sign`'s key
    /// (a fleet with trusted keys runs only a signed shadow), the answer included.
    pub async fn set_shadow(
        &self,
        subscription: &str,
        bytes: &[u8],
        http_answer: Option<&HttpAnswer>,
        by: &str,
        sign: &Sign<'_>,
    ) -> Result<FleetShadow, FleetError> {
        self.fits(subscription, bytes.len())?;
        let version = crate::version::version_of(bytes);
        self.signs_trial(subscription, "a shadow", &version, sign)?;
        let stored = self.store_bytes(subscription, bytes).await?;
        let mut shadow = FleetShadow {
            shadow_id: new_id(),
            version: stored.version.clone(),
            size: stored.size,
            chunks: stored.chunks,
            upload: stored.upload.clone().unwrap_or_default(),
            set_by: by.chars().take(256).collect(),
            set_at_ms: now_ms(),
            on: true,
            signed: None,
            http_answer: http_answer.cloned(),
        };
        if let Sign::Key(key) = sign {
            shadow.signed = Some(key.sign(&shadow_statement(self.scope(subscription), &shadow)));
        }
        let old = self.shadow(subscription).await.ok().flatten();
        self.wrote(1);
        let written = self
            .table
            .set_fleet_shadow(
                &self.service,
                subscription,
                &shadow,
                old.as_ref().map(|(r, _)| *r),
            )
            .await?;
        if !written {
            self.remove(subscription, &stored).await;
            return Err(FleetError::Contended(subscription.to_owned()));
        }
        if let Some((_, old)) = old {
            self.remove(subscription, &old.component()).await;
        }
        Ok(shadow)
    }

    /// Before `key` signs a promotion of `shadow`: its own signature must verify against the
    /// fleet's trusted keys or `key` itself. A promotion never signs bytes only the table vouches
    /// for.
    pub fn vouch_shadow(
        &self,
        subscription: &str,
        shadow: &FleetShadow,
        key: &SignKey,
    ) -> Result<(), FleetError> {
        super::vouch_shadow(
            self.scope(subscription),
            shadow,
            &self.vouching(key.public()),
        )
    }

    /// Turns the fleet's shadow of `subscription` off; answers the one dropped (`None`: none).
    pub async fn shadow_off(
        &self,
        subscription: &str,
        by: &str,
    ) -> Result<Option<FleetShadow>, FleetError> {
        let Some((revision, shadow)) = self.shadow(subscription).await?.filter(|(_, s)| s.on)
        else {
            return Ok(None);
        };
        let off = FleetShadow {
            on: false,
            set_by: by.chars().take(256).collect(),
            set_at_ms: now_ms(),
            ..shadow.clone()
        };
        self.wrote(1);
        if !self
            .table
            .set_fleet_shadow(&self.service, subscription, &off, Some(revision))
            .await?
        {
            return Err(FleetError::Contended(subscription.to_owned()));
        }
        Ok(Some(shadow))
    }
}
