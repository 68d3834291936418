// The subscription's configuration values ([subscription.config] in shardhost.toml), through
// the host's wasi:config/store.

import { configGet, configGetAll } from "./bindings.js";
import { isLive } from "./log.js";

function live() {
  if (!isLive()) {
    // Module top level runs once, when componentize-js builds the component (a snapshot).
    throw new Error(
      "config values can only be read while the host calls the handler, not at module top level (it runs when the component is built)",
    );
  }
}

/**
 * The subscription's configuration values (`[subscription.config]` in shardhost.toml):
 * `config.get("carrier_url")`.
 */
export const config = Object.freeze({
  /**
   * The value of `name`, or `undefined` when the subscription's config has none.
   * @param {string} name
   * @returns {string | undefined}
   */
  get(name) {
    if (typeof name !== "string") {
      throw new TypeError(`config.get(name): name must be a string, got ${name === null ? "null" : typeof name}`);
    }
    live();
    try {
      const value = configGet(name);
      return value === null ? undefined : value;
    } catch {
      return undefined; // the store's own error (an upstream source): as if there were none
    }
  },

  /**
   * Every value, as an object by name.
   * @returns {Record<string, string>}
   */
  all() {
    live();
    try {
      return Object.fromEntries(configGetAll());
    } catch {
      return {};
    }
  },
});
