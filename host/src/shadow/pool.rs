//! Where shadows run: one thread of their own with a single-threaded async runtime, at the
//! lowest CPU priority, made when the first shadow is set. On a busy machine the shards get the
//! cores first; a shadow that cannot keep up drops batches instead of slowing them.

use std::sync::OnceLock;

use tokio::runtime::Handle;

/// The runtime shadow tasks are spawned on.
pub fn handle() -> Handle {
    static POOL: OnceLock<Handle> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("shardhost-shadow".into())
            .spawn(move || {
                crate::wasm::lower_priority(19);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the shadow runtime starts");
                let _ = tx.send(runtime.handle().clone());
                // Runs the spawned shadow tasks for as long as the process lives.
                runtime.block_on(std::future::pending::<()>());
            })
            .expect("the shadow thread starts");
        rx.recv().expect("the shadow thread sends its runtime")
    })
    .clone()
}
