// config.get / config.all over the stand-in of wasi:config/store (testing/config.js).
import assert from "node:assert/strict";
import { test } from "node:test";
import { fake, sdk, wit } from "../testing/sdk-tests.js";

const { config, handler, ack } = sdk;

test("config values are read only while the host calls the handler", () => {
  fake.state.config = { greeting: "hello" };
  assert.throws(() => config.get("greeting"), /only be read while the host calls the handler, not at module top level/);
  handler(() => ack)(wit.info(), []); // the first call
  assert.equal(config.get("greeting"), "hello");
});

test("get: a value, or undefined; all: every value", () => {
  fake.state.config = { greeting: "hello", empty: "" };
  assert.equal(config.get("greeting"), "hello");
  assert.equal(config.get("empty"), "");
  assert.equal(config.get("missing"), undefined);
  assert.equal(config.get("toString"), undefined);
  assert.deepEqual(config.all(), { greeting: "hello", empty: "" });
  assert.throws(() => config.get(1), /name must be a string, got number/);
  assert.ok(Object.isFrozen(config));
});

test("without state.config, values come from the environment (SHARDHOST_CONFIG_<NAME>)", () => {
  fake.state.config = undefined;
  process.env.SHARDHOST_CONFIG_CARRIER_URL = "http://c/";
  try {
    assert.equal(config.get("carrier_url"), "http://c/");
    assert.equal(config.get("carrier-url"), "http://c/");
    assert.equal(config.get("other"), undefined);
  } finally {
    delete process.env.SHARDHOST_CONFIG_CARRIER_URL;
  }
});
