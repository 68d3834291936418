// Stands in for the `wasi:config/store` import under Node (see ./hooks.js): answers from
// `state.config` of ./host.js, an object of name -> value; when it is undefined (the default),
// from the environment, SHARDHOST_CONFIG_<NAME> (the name upper-cased, every character but
// letters and digits as `_`), as the Rust SDK's native build does.
import { state } from "./host.js";

/** The environment variable a config value comes from when `state.config` is undefined. */
export function envName(name) {
  return `SHARDHOST_CONFIG_${name.replace(/[^A-Za-z0-9]/g, "_").toUpperCase()}`;
}

export function get(name) {
  if (state.config === undefined) return process.env[envName(name)];
  return Object.hasOwn(state.config, name) ? String(state.config[name]) : undefined;
}

export function getAll() {
  if (state.config === undefined) return [];
  return Object.entries(state.config).map(([k, v]) => [k, String(v)]);
}
