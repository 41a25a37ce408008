//! Every decoder of `agentbox::interconnect::wire` on arbitrary bytes (see `../check.rs`).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../check.rs"]
mod check;

fuzz_target!(|data: &[u8]| {
    check::check(data);
});
