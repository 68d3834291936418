//! The fleet's rows, beside the leases in a DynamoDB lease table: what each subscription should
//! run (`desired/`) and the components' bytes (`component.rs`), every instance's heartbeat
//! (`roster.rs`), rollouts (`rollout.rs`) and fleet shadows (`shadow.rs`), both one JSON
//! document and a revision (`doc.rs`), and the fleet's envelope key (`secret.rs`).
//!
//! Every key starts with `#`, which no Kinesis stream name or shard id holds, so these rows
//! never meet a lease row (`stream:shard`) or an earlier-version row (a bare shard id). They
//! are sent through the lease store's DynamoDB client, to its table, but never through the
//! lease store: [`FleetTable`] is a type of its own beside it, and what the fleet decides with
//! these rows is the fleet room's (`fleet/`).
//!
//! Anyone who can write the table can write these rows: each is checked attribute by attribute
//! before it is believed, and every write that decides something is conditional on the row as
//! read.

mod component;
mod desired;
mod doc;
mod rollout;
mod roster;
mod secret;
mod shadow;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::lease::{DynamoLeaseStore, LeaseError};
pub use component::new_id;
pub use desired::{
    BadRow, CHUNK_BYTES, Desired, DesiredRead, MAX_GENERATION, Seen, SetDesired, StoredComponent,
    is_id, is_version,
};
pub use doc::DocRead;
pub use rollout::{Rollout, RolloutRead, RolloutState};
pub use roster::{Roster, RosterRow};
pub use shadow::FleetShadow;

/// The fleet's rows of one DynamoDB lease table.
///
/// Beyond what the lease store needs (`dynamodb:GetItem`, `dynamodb:UpdateItem`), the
/// credentials need `dynamodb:DeleteItem` for fleet deploys to remove the bytes of versions older
/// than the previous one and for a clean stop to remove the instance's heartbeat row, and
/// `dynamodb:Scan` to read the roster.
#[derive(Clone, Debug)]
pub struct FleetTable {
    client: Client,
    table: String,
}

impl FleetTable {
    /// The fleet's rows in the table of `store`, sent through its client.
    pub fn beside(store: &DynamoLeaseStore) -> FleetTable {
        FleetTable {
            client: store.client().clone(),
            table: store.table_name().to_owned(),
        }
    }

    /// The table's name.
    pub fn table_name(&self) -> &str {
        &self.table
    }

    /// A store error naming what was done, on which row of which table.
    fn sdk_error<E, R>(&self, what: &str, row: &str, e: SdkError<E, R>) -> LeaseError
    where
        E: std::error::Error + ProvideErrorMetadata + 'static,
        R: std::fmt::Debug,
    {
        crate::lease::dynamo_rows::sdk_error(&self.table, what, row, e)
    }
}
