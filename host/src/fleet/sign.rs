//! Signing the fleet's rows: what a deploy, a rollback, a rollout or a shadow is signed with,
//! and what is refused before anything is written (with trusted keys: unsigned writes, keys the
//! fleet does not trust, and rollbacks to versions only the table vouches for).

use super::{Fleet, FleetError, Intent, Sign};
use crate::fleet_table::Desired;
use crate::signing::{SignKey, Signed, Untrusted};

impl Fleet {
    /// A signed rollback re-verifies the signature `version` was deployed under (`was`, kept
    /// in the row) before signing anything: against the fleet's trusted keys and the signer's own
    /// key (`Sign::Key`), or the fleet's (`Sign::Made`, checked again here). It never signs a
    /// version only the table vouches for.
    pub(super) fn vouches(
        &self,
        subscription: &str,
        version: &str,
        was: Option<&Intent>,
        sign: &Sign<'_>,
    ) -> Result<(), FleetError> {
        let keys = match sign {
            Sign::No => return Ok(()),
            Sign::Key(key) => self.vouching(key.public()),
            Sign::Made(_) if self.policy.trusted.is_empty() => return Ok(()),
            Sign::Made(_) => self.policy.trusted.clone(),
        };
        super::vouch_previous(self.scope(subscription), version, was, &keys)
    }

    /// With trusted keys, refuses an unsigned deploy, or one signed by a key the fleet does not
    /// trust, before anything is written; a signature made elsewhere is checked here too.
    pub fn signs(
        &self,
        subscription: &str,
        version: &str,
        sign: &Sign<'_>,
    ) -> Result<(), FleetError> {
        if self.policy.trusted.is_empty() {
            return Ok(());
        }
        let (generation, checked) = match sign {
            Sign::No => (0, Err(Untrusted::Unsigned)),
            Sign::Key(key) => (0, self.known(key)),
            Sign::Made(intent) => {
                let statement =
                    self.statement(subscription, version, intent.generation, &intent.deploy_id);
                let checked = self.policy.trusted.verify(&statement, Some(&intent.signed));
                (intent.generation, checked)
            }
        };
        checked.map_err(|source| FleetError::Untrusted {
            subscription: subscription.to_owned(),
            version: version.to_owned(),
            generation,
            source,
        })
    }

    /// With trusted keys, refuses an unsigned rollout or shadow (`what`), or one signed by a key
    /// the fleet does not trust, before anything is written. A signature made elsewhere is not
    /// taken for these: they are signed where the key is.
    pub fn signs_trial(
        &self,
        subscription: &str,
        what: &str,
        version: &str,
        sign: &Sign<'_>,
    ) -> Result<(), FleetError> {
        let checked = match sign {
            Sign::Made(_) => Err(Untrusted::Unsigned),
            _ if self.policy.trusted.is_empty() => Ok(()),
            Sign::No => Err(Untrusted::Unsigned),
            Sign::Key(key) => self.known(key),
        };
        checked.map_err(|source| FleetError::UntrustedTrial {
            subscription: subscription.to_owned(),
            what: what.to_owned(),
            version: version.to_owned(),
            source,
        })
    }

    /// Whether the fleet trusts `key`.
    fn known(&self, key: &SignKey) -> Result<(), Untrusted> {
        if self.policy.trusted.contains(&key.public()) {
            Ok(())
        } else {
            Err(Untrusted::UnknownKey(key.public().to_string()))
        }
    }

    pub(super) fn signature(
        &self,
        subscription: &str,
        version: &str,
        generation: u64,
        deploy_id: &str,
        sign: &Sign<'_>,
    ) -> Option<Signed> {
        match sign {
            Sign::No => None,
            Sign::Key(key) => {
                Some(key.sign(&self.statement(subscription, version, generation, deploy_id)))
            }
            Sign::Made(intent) => Some(intent.signed.clone()),
        }
    }
}

/// The signature `d`'s version was deployed under, with its generation and lineage: what the
/// next row keeps of it as its previous version's.
pub(super) fn signed_as(d: &Desired) -> Option<Intent> {
    d.signed.as_ref().map(|signed| Intent {
        generation: d.generation,
        deploy_id: d.deploy_id.clone(),
        signed: signed.clone(),
    })
}
