//! include/tooloop.h is generated, committed, and must match the code: this test regenerates it in memory
//! with the pinned cbindgen library and fails, naming the command to run, when the committed file is stale.
//! With TOOLOOP_BLESS=1 it writes the file instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

const REGENERATE: &str = "TOOLOOP_BLESS=1 cargo test -p tooloop-capi --test header";

fn generate() -> String {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("bindings/c/cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn committed_header_matches_the_code() {
    let header = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include/tooloop.h");
    let fresh = generate();
    if std::env::var_os("TOOLOOP_BLESS").is_some() {
        std::fs::write(&header, &fresh).expect("writing include/tooloop.h");
        eprintln!("wrote {}", header.display());
        return;
    }
    let committed = std::fs::read_to_string(&header).unwrap_or_default();
    if committed != fresh {
        let first_diff = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(fresh.lines().count()));
        panic!(
            "include/tooloop.h is stale (first difference at line {}: committed {:?}, generated {:?}).\n\
             Regenerate it with:\n\n    {REGENERATE}\n",
            first_diff + 1,
            committed.lines().nth(first_diff).unwrap_or("<end of file>"),
            fresh.lines().nth(first_diff).unwrap_or("<end of file>"),
        );
    }
}
