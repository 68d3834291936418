// For the SDK's own tests (not published): loads the SDK with its bindings resolved to the
// stand-in host (./host.js), quiet and answering publish and seek. From a test:
//   import { sdk, fake, wit, internal } from "../testing/sdk-tests.js";
// Only the resolve hooks: the SDK's own tests look at it before its first call too (what
// ./register.js would skip) and make their own fetches (src/http/fetch.js's createFetch).
import { register } from "node:module";

register("./hooks.js", import.meta.url);

export const sdk = await import("../src/index.js");
const host = await import("shardhost:handler/host@0.1.2");
// `state` over its wasi:keyvalue adapter (src/state/wasi.js), answered by ./keyvalue.js.
await import("../src/state/install.js");

/** The stand-in host, plus testReset(): reset to how the SDK's tests want it (quiet, publish
 * and seek answering). */
export const fake = {
  ...host,
  testReset() {
    host.reset();
    host.state.echo = false;
    host.state.publish = (stream) => `seq-${stream}`;
    host.state.seek = () => undefined;
  },
};
fake.testReset();

/** Host-shaped call arguments, as the bindings hand them to `handle`. */
export const wit = {
  info(fields = {}) {
    return { stream: "s", shardId: "shardId-000000000000", millisBehindLatest: undefined, attempt: 1, ...fields };
  },
  record(data, i = 0, fields = {}) {
    return {
      partitionKey: `pk-${i}`,
      sequenceNumber: String(100 + i),
      subSequenceNumber: 0,
      approximateArrivalTimestamp: 1700000000000n + BigInt(i),
      data: typeof data === "string" ? new TextEncoder().encode(data) : data,
      ...fields,
    };
  },
  records(texts) {
    return texts.map((t, i) => wit.record(t, i));
  },
};

/** SDK modules that are not public API (same instances as the SDK's own). */
export const internal = {
  log: await import("../src/log.js"),
  json: await import("../src/json.js"),
  outcome: await import("../src/outcome.js"),
  record: await import("../src/record.js"),
  stateSlot: await import("../src/state/slot.js"),
};
