//! The README's quick start stays true: its first command analyses a trace shipped in the
//! project, and the output block after it is what the binary prints for that trace, byte for
//! byte (it drifted from the binary twice before this test).

use std::path::Path;
use std::process::Command;

#[test]
fn the_quick_start_output_is_what_the_binary_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    // The quick start: a ```sh block whose first line runs `analyze` on a file, then the
    // next fenced block, its output.
    let sh = readme.find("```sh\n").expect("a ```sh block");
    let command = readme[sh + 6..].lines().next().expect("a command");
    let file = command
        .split_once(" analyze ")
        .map(|(_, f)| f.trim())
        .expect("the quick start runs `analyze FILE`");
    assert!(
        root.join(file).is_file(),
        "{file} is shipped in the project"
    );
    let after_sh = &readme[sh + 6..];
    let close = after_sh.find("```\n").expect("the sh block closes");
    let rest = &after_sh[close + 4..];
    let open = rest.find("```\n").expect("an output block") + 4;
    let len = rest[open..].find("```").expect("the output block closes");
    let shown = &rest[open..open + len];

    let out = Command::new(env!("CARGO_BIN_EXE_tracehound"))
        .args(["analyze", file])
        .current_dir(root)
        .output()
        .expect("run tracehound");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("UTF-8 output");
    if printed != shown {
        let (a, b): (Vec<&str>, Vec<&str>) = (printed.lines().collect(), shown.lines().collect());
        let first = a
            .iter()
            .zip(&b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        panic!(
            "README's quick-start output differs from the binary's from line {} of the block:\n  binary: {:?}\n  README: {:?}",
            first + 1,
            a.get(first),
            b.get(first)
        );
    }
}
