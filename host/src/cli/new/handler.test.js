// {{name}}'s tests: npm test (node --import shardhost/testing --test). Not part of the
// component: the build bundles only what {{name}}.js imports.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Record, ack, drop } from "shardhost";
import { state } from "shardhost/testing/host";
import { order } from "../{{name}}.js";

state.echo = false; // the handler's warnings would clutter the test output

const record = (data) => new Record({ partitionKey: "order-1", sequenceNumber: "1", data });

test("an order with a quantity is acked and one without is dropped", () => {
  assert.equal(order(record('{"id": 1, "sku": "mug", "quantity": 2}')), ack);
  assert.equal(order(record('{"id": 2, "sku": "mug"}')), drop);
  assert.equal(order(record("not an order")), drop);
});
