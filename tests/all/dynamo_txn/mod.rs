//! moto's DynamoDB (`DYNAMODB_TXN_TEST_ENDPOINT`; `tests/stack` starts it), which implements
//! TransactWriteItems where dynalite does not: every scenario of the lease store's tests runs
//! against it too (`lease_store`), and transactions over a lease row and a state table commit or
//! are cancelled whole, naming the item whose condition failed (`transact`), and no write is lost
//! beside a cancelled transaction (`at_once`).

mod at_once;
mod transact;

mod lease_store {
    crate::dynamo::every_scenario!(crate::support::dynamodb_txn_endpoint);
}
