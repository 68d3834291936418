//! What an instance trusts: with `[fleet] trusted_keys`, every row that can make code run (the
//! desired row, a rollout, the fleet's shadow) is run only under a signature that verifies for
//! this lease table, service and subscription and for everything the row decides (see
//! [`crate::signing`]).

use super::{Fleet, FleetError, Intent};
use crate::fleet_table::{Desired, FleetShadow, Rollout};
use crate::signing::{PublicKey, Scope, Statement, TrustedKeys};

impl Fleet {
    /// Where this fleet's signatures for `subscription` hold.
    pub fn scope<'a>(&'a self, subscription: &'a str) -> Scope<'a> {
        Scope {
            table: self.table.table_name(),
            service: &self.service,
            subscription,
        }
    }

    /// Whether this instance may run `desired` for `subscription`: with trusted keys, only when
    /// its signature verifies for this table, service, subscription, version, generation and
    /// lineage.
    pub fn trust(&self, subscription: &str, desired: &Desired) -> Result<(), FleetError> {
        if self.policy.trusted.is_empty() {
            return Ok(());
        }
        let statement = self.statement(
            subscription,
            &desired.component.version,
            desired.generation,
            &desired.deploy_id,
        );
        self.policy
            .trusted
            .verify(&statement, desired.signed.as_ref())
            .map_err(|source| FleetError::Untrusted {
                subscription: subscription.to_owned(),
                version: desired.component.version.clone(),
                generation: desired.generation,
                source,
            })
    }

    /// Whether this instance may run rollout `r`'s version on its shards: with trusted keys,
    /// only when its signature verifies for everything that decides what runs where.
    pub fn trust_rollout(&self, subscription: &str, r: &Rollout) -> Result<(), FleetError> {
        if self.policy.trusted.is_empty() {
            return Ok(());
        }
        let statement = rollout_statement(self.scope(subscription), r);
        self.policy
            .trusted
            .verify(&statement, r.signed.as_ref())
            .map_err(|source| FleetError::UntrustedTrial {
                subscription: subscription.to_owned(),
                what: format!("rollout {}", r.canary_id),
                version: r.version.clone(),
                source,
            })
    }

    /// Whether this instance may run `shadow` (on trial): with trusted keys, only signed.
    pub fn trust_shadow(&self, subscription: &str, shadow: &FleetShadow) -> Result<(), FleetError> {
        if self.policy.trusted.is_empty() {
            return Ok(());
        }
        self.policy
            .trusted
            .verify(
                &shadow_statement(self.scope(subscription), shadow),
                shadow.signed.as_ref(),
            )
            .map_err(|source| FleetError::UntrustedTrial {
                subscription: subscription.to_owned(),
                what: format!("the fleet's shadow {}", shadow.shadow_id),
                version: shadow.version.clone(),
                source,
            })
    }

    /// The keys a signer vouches by: the fleet's trusted keys and the signer's own.
    pub fn vouching(&self, signer: PublicKey) -> TrustedKeys {
        self.policy.trusted.and(signer)
    }

    /// What a deploy of `version` as `generation` of lineage `deploy_id` signs.
    pub fn statement<'a>(
        &'a self,
        subscription: &'a str,
        version: &'a str,
        generation: u64,
        deploy_id: &'a str,
    ) -> Statement<'a> {
        Statement::Deploy {
            scope: self.scope(subscription),
            version,
            generation,
            deploy_id,
        }
    }
}

/// What a rollout's signature says.
pub fn rollout_statement<'a>(scope: Scope<'a>, r: &'a Rollout) -> Statement<'a> {
    Statement::Rollout {
        scope,
        canary_id: &r.canary_id,
        version: &r.version,
        shards: &r.shards,
        share_permille: r.share_permille,
        started_at_ms: r.started_at_ms,
        window_ms: r.window_ms,
        abort_on: &r.abort_on,
    }
}

/// What a fleet shadow's signature says.
pub fn shadow_statement<'a>(scope: Scope<'a>, shadow: &'a FleetShadow) -> Statement<'a> {
    Statement::Shadow {
        scope,
        shadow_id: &shadow.shadow_id,
        version: &shadow.version,
        http_answer: shadow.http_answer.as_ref(),
    }
}

/// Before a rollback is signed: the signature `version` was deployed under (`was`, kept in the
/// desired row) must verify under `keys`. Nothing only the table vouches for is signed.
pub fn vouch_previous(
    scope: Scope<'_>,
    version: &str,
    was: Option<&Intent>,
    keys: &TrustedKeys,
) -> Result<(), FleetError> {
    let unvouched = |why: String| FleetError::Unvouched {
        subscription: scope.subscription.to_owned(),
        what: "a rollback to",
        version: version.to_owned(),
        why,
    };
    let was = was.ok_or_else(|| {
        unvouched(
            "it was never deployed under a signature (the row keeps none for it); deploy its \
             file with --sign-key instead"
                .into(),
        )
    })?;
    let statement = Statement::Deploy {
        scope,
        version,
        generation: was.generation,
        deploy_id: &was.deploy_id,
    };
    keys.verify(&statement, Some(&was.signed)).map_err(|e| {
        unvouched(format!(
            "the signature it was deployed under (generation {}) is refused: {e}",
            was.generation
        ))
    })
}

/// Before a promotion of `shadow` is signed: the shadow row's own signature must verify under
/// `keys`.
pub fn vouch_shadow(
    scope: Scope<'_>,
    shadow: &FleetShadow,
    keys: &TrustedKeys,
) -> Result<(), FleetError> {
    keys.verify(&shadow_statement(scope, shadow), shadow.signed.as_ref())
        .map_err(|e| FleetError::Unvouched {
            subscription: scope.subscription.to_owned(),
            what: "a promotion of the shadow",
            version: shadow.version.clone(),
            why: format!(
                "the shadow's own signature is refused ({e}); set it again with --shadow \
                 --sign-key, or deploy its file with --sign-key"
            ),
        })
}
