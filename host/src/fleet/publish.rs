//! Writing the desired row: deploys and rollbacks, each conditional on the row as read, signed
//! as asked, one generation past everything the fleet has seen, and removing only the parts
//! their own write dropped (see the module docs of `fleet`).

use super::sign::signed_as;
use super::{Fleet, FleetError, Sign};
use crate::fleet_table::{Desired, MAX_GENERATION, Seen, SetDesired, StoredComponent, new_id};
use crate::lease::now_ms;
use crate::version::{short_version, version_of};

/// How many times a deploy reads the desired row again when another deploy wrote it meanwhile.
const CONFLICT_RETRIES: u32 = 5;

impl Fleet {
    /// Makes `bytes` (already validated by the caller) what `subscription` should run
    /// fleet-wide. `running` is the version the caller runs now and its bytes, stored as the
    /// rollback target when the fleet had no desired version yet. `by` says who deploys.
    /// Answers the desired state written (the one already there when it wants these bytes).
    pub async fn publish(
        &self,
        subscription: &str,
        bytes: &[u8],
        running: Option<&[u8]>,
        by: &str,
        sign: &Sign<'_>,
    ) -> Result<Desired, FleetError> {
        self.fits(subscription, bytes.len())?;
        self.signs(subscription, &version_of(bytes), sign)?;
        // Parts this deploy uploaded: removed again unless the row it wrote refers to them
        // (no other deploy ever knew of them).
        let mut own = Uploads::default();
        let published = self
            .publish_with(subscription, bytes, running, by, sign, &mut own)
            .await;
        for stored in own.all() {
            self.remove(subscription, &stored).await;
        }
        published
    }

    async fn publish_with(
        &self,
        subscription: &str,
        bytes: &[u8],
        running: Option<&[u8]>,
        by: &str,
        sign: &Sign<'_>,
        own: &mut Uploads,
    ) -> Result<Desired, FleetError> {
        let version = version_of(bytes);
        for _ in 0..CONFLICT_RETRIES {
            let (seen, now) = self.current(subscription).await?;
            if let Some(d) = &now
                && d.component.version == version
                && (matches!(sign, Sign::No) || d.signed.is_some())
            {
                return Ok(d.clone());
            }
            let (generation, deploy_id) = self.next(subscription, now.as_ref(), sign).await?;
            let previous = match &now {
                Some(d) => Some(d.component.clone()),
                None => match running {
                    Some(r) if version_of(r) != version => {
                        Some(own.running(self, subscription, r).await?)
                    }
                    _ => None,
                },
            };
            let component = match now.as_ref().and_then(|d| d.previous.as_ref()) {
                // The previous version's parts, referenced only under this row's condition.
                Some(p) if p.version == version => p.clone(),
                _ => own.component(self, subscription, bytes).await?,
            };
            let desired = Desired {
                signed: self.signature(subscription, &version, generation, &deploy_id, sign),
                component,
                generation,
                deploy_id,
                deployed_by: by.to_owned(),
                deployed_at_ms: now_ms(),
                previous,
                previous_signed: now.as_ref().and_then(signed_as),
            };
            if self.write(subscription, &desired, &seen).await? {
                own.written(&desired);
                self.drop_unreferenced(subscription, now.as_ref(), &desired)
                    .await;
                return Ok(desired);
            }
            if let Sign::Made(_) = sign {
                return Err(self.moved(subscription).await);
            }
        }
        Err(FleetError::Contended(subscription.to_owned()))
    }

    /// Makes the version before the desired one desired again, fleet-wide.
    pub async fn rollback(
        &self,
        subscription: &str,
        by: &str,
        sign: &Sign<'_>,
    ) -> Result<Desired, FleetError> {
        for _ in 0..CONFLICT_RETRIES {
            let (seen, now) = self.current(subscription).await?;
            let Some((d, previous)) = now.as_ref().and_then(|d| Some((d, d.previous.clone()?)))
            else {
                return Err(FleetError::NothingToRollBack(subscription.to_owned()));
            };
            self.signs(subscription, &previous.version, sign)?;
            self.vouches(
                subscription,
                &previous.version,
                d.previous_signed.as_ref(),
                sign,
            )?;
            let (generation, deploy_id) = self.next(subscription, now.as_ref(), sign).await?;
            let desired = Desired {
                signed: self.signature(
                    subscription,
                    &previous.version,
                    generation,
                    &deploy_id,
                    sign,
                ),
                component: previous,
                generation,
                deploy_id,
                deployed_by: by.to_owned(),
                deployed_at_ms: now_ms(),
                previous: Some(d.component.clone()),
                previous_signed: signed_as(d),
            };
            if self.write(subscription, &desired, &seen).await? {
                return Ok(desired);
            }
            if let Sign::Made(_) = sign {
                return Err(self.moved(subscription).await);
            }
        }
        Err(FleetError::Contended(subscription.to_owned()))
    }

    /// Refuses a component larger than the fleet accepts.
    pub(super) fn fits(&self, subscription: &str, size: usize) -> Result<(), FleetError> {
        let max = self.policy.max_component_size;
        if size as u64 > max {
            return Err(FleetError::TooLarge {
                subscription: subscription.to_owned(),
                size: size as u64,
                max,
            });
        }
        Ok(())
    }

    /// The generation and lineage the next write of the row gets: one past the row's and every
    /// instance's (or, for a signature made elsewhere, the ones it was made for, when they still
    /// follow the row).
    pub(super) async fn next(
        &self,
        subscription: &str,
        now: Option<&Desired>,
        sign: &Sign<'_>,
    ) -> Result<(u64, String), FleetError> {
        let lineage = now.map(|d| d.deploy_id.clone()).filter(|id| !id.is_empty());
        if let Sign::Made(intent) = sign {
            // A row of the first release has no lineage: the signed write starts one.
            let follows = match now {
                Some(d) => {
                    intent.generation > d.generation
                        && lineage.as_ref().is_none_or(|l| *l == intent.deploy_id)
                }
                None => true,
            };
            if !follows || intent.generation > MAX_GENERATION {
                return Err(self.moved(subscription).await);
            }
            return Ok((intent.generation, intent.deploy_id.clone()));
        }
        let report = self.report(&[]).await?;
        let highest = report
            .highest_generation(subscription)
            .max(now.map_or(0, |d| d.generation));
        let generation = highest
            .checked_add(1)
            .filter(|g| *g <= MAX_GENERATION)
            .ok_or_else(|| FleetError::Exhausted(subscription.to_owned()))?;
        Ok((generation, lineage.unwrap_or_else(new_id)))
    }

    /// The answer to a signature made for a generation the row has passed.
    async fn moved(&self, subscription: &str) -> FleetError {
        let now = self.current(subscription).await.ok().and_then(|(_, d)| d);
        FleetError::Moved {
            subscription: subscription.to_owned(),
            now: now.as_ref().map_or(0, |d| d.generation),
            lineage: now.map(|d| d.deploy_id).unwrap_or_default(),
        }
    }

    /// Stores a component's bytes (its chunks counted as writes); its stored parts.
    pub(super) async fn store_bytes(
        &self,
        subscription: &str,
        bytes: &[u8],
    ) -> Result<StoredComponent, FleetError> {
        let version = version_of(bytes);
        let stored = self
            .table
            .put_component(&self.service, subscription, &version, bytes)
            .await?;
        self.wrote(u64::from(stored.chunks));
        Ok(stored)
    }

    /// Writes `desired` if the row is still as `seen`; `false` when another deploy came first.
    async fn write(
        &self,
        subscription: &str,
        desired: &Desired,
        seen: &Seen,
    ) -> Result<bool, FleetError> {
        self.wrote(1);
        let written = self
            .table
            .set_desired(&self.service, subscription, desired, seen)
            .await?;
        Ok(matches!(written, SetDesired::Done))
    }

    /// Removes the parts that writing `desired` over `before` dropped from the row: after that
    /// conditional write nothing can refer to them again.
    async fn drop_unreferenced(
        &self,
        subscription: &str,
        before: Option<&Desired>,
        desired: &Desired,
    ) {
        let Some(before) = before else {
            return;
        };
        let kept = [Some(&desired.component), desired.previous.as_ref()];
        for old in [Some(&before.component), before.previous.as_ref()]
            .into_iter()
            .flatten()
        {
            if !kept.iter().flatten().any(|k| k.same_parts(old)) {
                self.remove(subscription, old).await;
            }
        }
    }

    /// Removes a stored component's parts; a failure only leaves rows behind.
    pub(super) async fn remove(&self, subscription: &str, old: &StoredComponent) {
        self.wrote(u64::from(old.chunks));
        if let Err(e) = self
            .table
            .delete_component(&self.service, subscription, old)
            .await
        {
            tracing::warn!(
                subscription,
                version = short_version(&old.version),
                "cannot remove a handler version's bytes that nothing refers to: {e}"
            );
        }
    }
}

/// What one deploy uploaded itself.
#[derive(Default)]
struct Uploads {
    component: Option<StoredComponent>,
    running: Option<StoredComponent>,
}

impl Uploads {
    /// The parts of the component deployed, stored once per deploy.
    async fn component(
        &mut self,
        fleet: &Fleet,
        subscription: &str,
        bytes: &[u8],
    ) -> Result<StoredComponent, FleetError> {
        stored_once(&mut self.component, fleet, subscription, bytes).await
    }

    /// The parts of the version running before the fleet's first deploy, stored once.
    async fn running(
        &mut self,
        fleet: &Fleet,
        subscription: &str,
        bytes: &[u8],
    ) -> Result<StoredComponent, FleetError> {
        stored_once(&mut self.running, fleet, subscription, bytes).await
    }

    /// A row refers to these parts now: they are no longer this deploy's to remove.
    fn written(&mut self, desired: &Desired) {
        let referenced = |c: &Option<StoredComponent>| {
            c.as_ref().is_some_and(|c| {
                desired.component.same_parts(c)
                    || desired.previous.as_ref().is_some_and(|p| p.same_parts(c))
            })
        };
        if referenced(&self.component) {
            self.component = None;
        }
        if referenced(&self.running) {
            self.running = None;
        }
    }

    fn all(&mut self) -> Vec<StoredComponent> {
        [self.component.take(), self.running.take()]
            .into_iter()
            .flatten()
            .collect()
    }
}

/// `bytes` stored in `slot`'s upload, storing them first if this deploy has not yet.
async fn stored_once(
    slot: &mut Option<StoredComponent>,
    fleet: &Fleet,
    subscription: &str,
    bytes: &[u8],
) -> Result<StoredComponent, FleetError> {
    if let Some(stored) = slot {
        return Ok(stored.clone());
    }
    let stored = fleet.store_bytes(subscription, bytes).await?;
    *slot = Some(stored.clone());
    Ok(stored)
}
