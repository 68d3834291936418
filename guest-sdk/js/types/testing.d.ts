// Type declarations of `shardhost/testing` (testing/register.js): imported for its effect only,
// first (`node --import shardhost/testing --test`, or `import "shardhost/testing"` before the
// app), it runs a handler under Node against a stand-in host; `shardhost/testing/host` is that
// host, for a test to set up and look at.
export {};
