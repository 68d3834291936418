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

/// A component importing the whole `host` interface at `version`.
fn importing_host(version: &str) -> String {
    format!(
        r#"(component
          (import "shardhost:handler/host@{version}" (instance
            (type $level (enum "trace" "debug" "info" "warn" "error"))
            (export "level" (type $l (eq $level)))
            (export "log" (func (param "level" $l) (param "message" string)))
            (export "max-log-level" (func (result (option $l))))
            (export "publish" (func (param "stream" string) (param "partition-key" string)
              (param "data" (list u8)) (result (result string (error string)))))
            (export "seek" (func (param "sequence-number" string)
              (result (result (error string)))))
          ))
        )"#
    )
}

#[test]
fn components_built_against_every_host_interface_version_link() {
    let engine = wasmtime::Engine::default();
    let linker = super::super::instance::linker(&engine).unwrap();
    for version in ["0.1.0", "0.1.1", "0.1.2"] {
        let bytes = wat::parse_str(importing_host(version)).unwrap();
        let component = wasmtime::component::Component::new(&engine, bytes).unwrap();
        if let Err(e) = linker.instantiate_pre(&component) {
            panic!("host@{version}: {e:#}");
        }
    }
}
