//! Containment of panics on untrusted bytes: Winterfell asserts (rather than returns an error) on
//! some malformed proof headers (a blowup factor that is not a power of two, a trace length
//! below 8, ...), and a proof file is user input.

use std::panic::{self, AssertUnwindSafe};

/// Runs `f`; a panic inside is returned as its message, without the panic report on stderr.
pub fn contain_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    panic::set_hook(hook);
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|message| message.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "malformed proof".to_string())
    })
}
