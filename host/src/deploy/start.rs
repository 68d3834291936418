//! The version a subscription starts on: with a fleet that has a usable, trusted desired
//! version, that one (taken as at every poll: `take.rs`); when the row cannot be used or this
//! instance refuses it, the fleet version it ran last (kept on disk) or else the config's file.

use std::sync::Arc;

use super::take::{Taken, Want};
use super::{Applied, Deployer};
use crate::config::SubscriptionConfig;
use crate::fleet::{Fleet, FleetError};
use crate::status::fleet::Refusal;
use crate::version::{short_version, version_of};
use crate::wasm::{HandlerComponent, LoadError, Urgency};

/// The handler a subscription starts with, and the fleet state it starts in (for
/// [`Deployer::started_at`]).
pub(crate) struct Start {
    pub component: Arc<HandlerComponent>,
    pub applied: Applied,
    pub refusal: Option<Refusal>,
    /// The refusal is of a row that cannot be used at all.
    pub bad_row: bool,
}

impl Start {
    fn file(component: Arc<HandlerComponent>) -> Start {
        Start {
            component,
            applied: Applied::default(),
            refusal: None,
            bad_row: false,
        }
    }
}

/// Why a subscription cannot start.
#[derive(Debug)]
pub(crate) enum StartFailed {
    /// The config's handler file does not load.
    Handler(LoadError),
    /// The fleet's desired row could not be read.
    Fleet(FleetError),
}

impl From<LoadError> for StartFailed {
    fn from(e: LoadError) -> Self {
        StartFailed::Handler(e)
    }
}

impl Deployer {
    /// The handler `s` starts with, and the fleet state it starts in. Fails when the config's
    /// file is needed and does not load, or the desired row cannot be read at all.
    pub(crate) async fn first_handler(&self, s: &SubscriptionConfig) -> Result<Start, StartFailed> {
        let Some(fleet) = self.fleet.as_ref().map(|l| &l.fleet) else {
            return Ok(Start::file(self.load_file(s).await?));
        };
        let desired = match fleet.desired(&s.name).await {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(Start::file(self.load_file(s).await?)),
            Err(e @ FleetError::BadRow { .. }) => {
                let refusal = Refusal {
                    version: String::new(),
                    generation: 0,
                    error: e.to_string(),
                };
                return self
                    .fall_back(s, fleet, Applied::default(), refusal, true)
                    .await;
            }
            Err(source) => return Err(StartFailed::Fleet(source)),
        };
        let applied = Applied::of(&desired);
        let version = &desired.component.version;
        let want = Want {
            subscription: &s.name,
            limits: s.limits,
            wasi: &s.wasi,
            desired: &desired,
            trust: true,
            urgency: Urgency::Now,
        };
        let in_file = || std::fs::read(&s.handler).is_ok_and(|b| version_of(&b) == *version);
        let refusal = match self.take(fleet, want, || in_file().then_some(())).await {
            Ok(taken) => {
                let component = match taken {
                    Taken::AtHand(()) => self.load_file(s).await?,
                    Taken::Loaded(component) => {
                        tracing::info!(
                            subscription = %s.name, version = short_version(version),
                            generation = desired.generation, deployed_by = %desired.deployed_by,
                            file = %s.handler.display(),
                            "running the fleet's desired handler version (deployed to the lease table), not the config file's"
                        );
                        component
                    }
                };
                return Ok(Start {
                    component,
                    applied,
                    refusal: None,
                    bad_row: false,
                });
            }
            Err(not) => Refusal {
                version: version.clone(),
                generation: desired.generation,
                error: not.to_string(),
            },
        };
        self.fall_back(s, fleet, applied, refusal, false).await
    }

    /// Starts on the fleet version this instance ran last (when it is still trusted and loads),
    /// else on the config's file, reporting `refusal`.
    async fn fall_back(
        &self,
        s: &SubscriptionConfig,
        fleet: &Fleet,
        applied: Applied,
        refusal: Refusal,
        bad_row: bool,
    ) -> Result<Start, StartFailed> {
        let last_ran = self.fleet.as_ref().and_then(|l| l.last_ran.as_ref());
        let kept = last_ran.and_then(|l| l.load(&s.name));
        if let Some((kept, bytes)) = kept {
            let statement =
                fleet.statement(&s.name, &kept.version, kept.generation, &kept.deploy_id);
            let trusted = &fleet.policy().trusted;
            let signed = kept.signed();
            if trusted.is_empty() || trusted.verify(&statement, signed.as_ref()).is_ok() {
                let origin = format!("fleet generation {} (kept on disk)", kept.generation);
                if let Ok(component) = self
                    .runtime
                    .load_bytes(&origin, &bytes, s.limits, &s.wasi)
                    .await
                {
                    tracing::error!(
                        subscription = %s.name, version = short_version(&kept.version),
                        generation = kept.generation,
                        "refused the fleet's desired handler version: {}; running the fleet version this instance ran last", refusal.error
                    );
                    let applied = if bad_row {
                        Applied {
                            generation: kept.generation,
                            deploy_id: kept.deploy_id,
                        }
                    } else {
                        applied
                    };
                    return Ok(Start {
                        component,
                        applied,
                        refusal: Some(refusal),
                        bad_row,
                    });
                }
            }
        }
        tracing::error!(
            subscription = %s.name, file = %s.handler.display(),
            "refused the fleet's desired handler version: {}; running the config file's", refusal.error
        );
        Ok(Start {
            component: self.load_file(s).await?,
            applied,
            refusal: Some(refusal),
            bad_row,
        })
    }

    /// Loads the subscription's configured handler file.
    async fn load_file(&self, s: &SubscriptionConfig) -> Result<Arc<HandlerComponent>, LoadError> {
        let component = self
            .runtime
            .load_file(&s.handler, s.limits, &s.wasi)
            .await?;
        tracing::info!(
            subscription = %s.name, handler = %s.handler.display(),
            version = short_version(component.version()), "handler loaded"
        );
        Ok(component)
    }
}
