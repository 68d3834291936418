// shardhost: write shardhost Kinesis handlers in JavaScript. See README.md.
//
//   import { handler, ack, drop, retry } from "shardhost";
//   export const handle = handler((record) => (record.data.length ? ack : drop));
//
// HTTP is the global `fetch` (in a component built with HTTP: src/http/install.js); state is
// `state` (over wasi:keyvalue in a component built with state: src/state/install.js).

import { routeConsole } from "./log.js";

export { handler, batchHandler } from "./handler.js";
export { Outcome, ack, drop, retry, retryAfter } from "./outcome.js";
export { Record, BatchInfo } from "./record.js";
export { DecodeError, integer } from "./json.js";
export { log, LEVELS } from "./log.js";
export { publish, seek, HostError } from "./host.js";
export { config } from "./config.js";
export { HttpError, MAX_REDIRECTS } from "./http/error.js";
export { state } from "./state/state.js";
export { StateError } from "./state/error.js";

// The host throws a guest's stdout and stderr away: console goes to the host's log instead.
routeConsole();
