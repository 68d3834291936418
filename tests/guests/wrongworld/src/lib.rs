//! A component that does not implement `shardhost:handler/handler`: it exports a `handle`
//! of another type (`func(x: u32) -> u32`) and imports nothing, so the host's type check must
//! refuse it. Built on wit-bindgen directly, not on the SDK.

wit_bindgen::generate!({
    inline: r#"
        package fixture:wrongworld@0.1.0;

        world wrong {
            export handle: func(x: u32) -> u32;
        }
    "#,
});

struct Wrong;

impl Guest for Wrong {
    fn handle(x: u32) -> u32 {
        x.wrapping_add(1)
    }
}

export!(Wrong);
