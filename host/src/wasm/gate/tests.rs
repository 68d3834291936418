use super::provided;

#[test]
fn the_host_gives_wasi_0_2_outgoing_http_config_and_its_own_interface_and_nothing_else() {
    for given in [
        "wasi:cli/environment@0.2.0",
        "wasi:io/streams@0.2.6",
        "wasi:sockets/tcp@0.2.3",
        "wasi:http/outgoing-handler@0.2.12",
        "wasi:http/types@0.2.3",
        "wasi:config/store@0.2.0-rc.1",
        "shardhost:handler/host@0.1.0",
        "shardhost:handler/host@0.1.1",
        "shardhost:handler/host@0.1.2",
        "shardhost:handler/types@0.1.0",
        "wasi:keyvalue/store@0.2.0-draft",
        "wasi:keyvalue/atomics@0.2.0-draft",
        "wasi:keyvalue/batch@0.2.0-draft",
        "shardhost:handler/conditional@0.1.2",
    ] {
        assert!(provided(given), "{given}");
    }
    for missing in [
        "wasi:http/incoming-handler@0.2.3",
        "wasi:config/store@0.2.0-draft",
        "wasi:cli/environment@0.3.0",
        "wasi:keyvalue/store@0.2.0",
        "wasi:keyvalue/watcher@0.2.0-draft",
        "shardhost:handler/conditional@0.1.1",
        "shardhost:handler/host@0.2.0",
        "shardhost:handler/log@0.1.0",
        "env",
    ] {
        assert!(!provided(missing), "{missing}");
    }
}
